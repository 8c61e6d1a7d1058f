"""A run directory in memory: run.json's fields, the attempts, the grading so far.

run.json is a snapshot written at the start and at the end of each phase; the journals
(``attempts.jsonl``, ``grading.jsonl``) are the truth while a phase runs. Opening a run merges
both, the journal's later record for a key replacing the earlier one, so a retried attempt
appears exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from mst import endings
from mst.config.errors import Problem, UserError
from mst.runs.files import atomic_write_json_list, read_journal, read_json
from mst.runs.layout import RUN_SCHEMA, Key, RunPaths, key_of
from mst.runs.records import KeyIndex, RecordStore

PhaseState = Literal["complete", "partial", "skipped", "pending"]


class _RunFile(BaseModel):
    """The edge check of run.json: the fields every reader relies on."""

    model_config = ConfigDict(extra="allow", hide_input_in_errors=True)

    schema_: Literal["mst.run/v1"]
    id: str
    eval: dict[str, Any]
    variants: list[dict[str, Any]]
    cases: list[dict[str, Any]]
    attempts: list[dict[str, Any]] = []
    phases: dict[str, str]


@dataclass
class Run:
    """The records live in :class:`RecordStore` mappings (memory flat in the number of attempts):
    a record read from them is a fresh dict, so store a changed record back by assigning it."""

    paths: RunPaths
    meta: dict[str, Any]
    attempts: RecordStore[Key] = field(init=False)
    trial_grades: RecordStore[Key] = field(init=False)
    comparisons: RecordStore[tuple[str, str]] = field(default_factory=RecordStore)

    def __post_init__(self) -> None:
        keys: KeyIndex[Key] = KeyIndex()  # an attempt and its grading share one key
        self.attempts = RecordStore(summarize=endings.from_record, keys=keys)
        self.trial_grades = RecordStore(keys=keys)

    def adopt_attempts(self, attempts: RecordStore[Key]) -> None:
        """Take another run's attempt records as they are (a regrade grades the same attempts);
        grading starts empty."""
        self.attempts = attempts
        self.trial_grades = RecordStore(keys=attempts.key_index)

    @property
    def id(self) -> str:
        return str(self.meta["id"])

    def ending(self, key: Key) -> endings.Ending:
        """Kept in memory when the attempt is stored: readers never decode a record for it."""
        ending: endings.Ending = self.attempts.summary(key)
        return ending

    def snapshot(self) -> dict[str, Any]:
        """run.json's content: the metadata and every attempt once, in a stable order."""
        ordered = [self.attempts[k] for k in sorted(self.attempts)]
        return {**self.meta, "attempts": ordered}

    def write(self) -> None:
        """Write :meth:`snapshot`, streamed one attempt at a time (same bytes, flat memory)."""
        atomic_write_json_list(self.paths.run_json, self.meta, "attempts",
                               (self.attempts[k] for k in sorted(self.attempts)))


def attempt_record(record: dict[str, Any], ending: endings.Ending) -> dict[str, Any]:
    """Stamp the ending and the derived ``infrastructureError`` on an attempt record."""
    record["ending"] = endings.to_json(ending)
    record["infrastructureError"] = endings.infrastructure_error(ending)
    return record


def open_run(path: Path, *, repair: bool = False, grading: bool = True) -> Run:
    """Read a run. ``grading=False`` skips its grading records (a regrade grades afresh).

    The journals are read first and win; run.json's snapshot adds only what they lack, so a
    record present in both is decoded and stored once.
    """
    paths = RunPaths(path)
    if not path.is_dir():
        raise UserError(Problem(str(path), "not a run directory (it does not exist)"))
    if not paths.run_json.is_file():
        raise UserError(Problem(str(path), "not a run directory (no run.json inside)"))
    data = read_json(paths.run_json, "run.json")
    if not isinstance(data, dict):
        raise UserError(Problem(str(paths.run_json), "run.json is corrupt: expected an object"))
    try:
        _RunFile.model_validate({**data, "schema_": data.get("schema")})
    except ValidationError as exc:
        err = exc.errors(include_input=False)[0]
        loc = ".".join(str(p) for p in err["loc"]).replace("schema_", "schema")
        raise UserError(Problem(str(paths.run_json), f"run.json is not a {RUN_SCHEMA} file: {err['msg']}",
                                loc)) from None
    meta = {k: v for k, v in data.items() if k != "attempts"}
    run = Run(paths, meta)
    for i, rec in enumerate(read_journal(paths.attempts, repair=repair)):
        _add_attempt(run, rec, str(paths.attempts), f"line {i + 1}")
    journaled = len(run.attempts) > 0
    for i, rec in enumerate(data.get("attempts", [])):
        _add_attempt(run, rec, str(paths.run_json), f"attempts[{i}]", only_new=journaled)
    if grading:
        _load_grading(run, repair=repair)
    return run


def _add_attempt(run: Run, rec: Any, file: str, where: str, *, only_new: bool = False) -> None:
    try:
        key = key_of(rec)
        if only_new and key in run.attempts:
            return
        ending = endings.from_record(rec)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(Problem(file, f"corrupt attempt record ({where}): {exc}")) from None
    if "ending" not in rec:
        attempt_record(rec, ending)  # an old run: map its ending once, when read
    run.attempts[key] = rec


def _load_grading(run: Run, *, repair: bool) -> None:
    if run.paths.results.is_file():
        results = read_json(run.paths.results, "results.json")
        for rec in results.get("trials", []):
            run.trial_grades[key_of(rec)] = rec
    if run.paths.comparisons.is_file():
        comps = read_json(run.paths.comparisons, "comparisons.json")
        for rec in comps.get("comparisons", []):
            run.comparisons[(rec["candidate"], rec["case"])] = rec
    for rec in read_journal(run.paths.grading_journal, repair=repair):
        if rec.get("kind") == "pairwise":
            run.comparisons[(rec["candidate"], rec["case"])] = rec
        else:
            run.trial_grades[key_of(rec)] = rec
