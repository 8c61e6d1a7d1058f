"""A run directory in memory: run.json's fields, the attempts, the grading so far.

run.json is a snapshot written at the start and at the end of each phase; the journals
(``attempts.jsonl``, ``grading.jsonl``) are the truth while a phase runs. Opening a run merges
both, the journal's later record for a key replacing the earlier one, so a retried attempt
appears exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from mst import endings
from mst.config.errors import Problem, UserError
from mst.runs.attempts import AttemptRecord, ending_of
from mst.runs.files import read_journal, read_journal_lines
from mst.runs.grading_records import CaseComparison, TrialGrading
from mst.runs.layout import RUN_SCHEMA, Key, RunPaths, key_of
from mst.runs.meta import RunMeta
from mst.runs.record_files import read_record_file, write_record_file
from mst.runs.records import KeyIndex, RecordCodec, RecordStore


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


_ATTEMPT: RecordCodec[AttemptRecord] = RecordCodec(AttemptRecord)
_GRADING: RecordCodec[TrialGrading] = RecordCodec(TrialGrading)
_COMPARISON: RecordCodec[CaseComparison] = RecordCodec(CaseComparison)


def _status(grading: TrialGrading) -> str:
    """Kept in memory per trial (shared: two values): whether a run's grading is complete is
    decided without decoding a record."""
    return grading.status


def _comparisons(attempts: KeyIndex[Key] | None = None) -> RecordStore[tuple[str, str], CaseComparison]:
    """The comparisons' store: its keys numbered by the attempts' case numbers (see KeyIndex)."""
    return RecordStore(codec=_COMPARISON, keys=KeyIndex(cases_of=attempts))


@dataclass
class Run:
    """The records live in :class:`RecordStore` mappings (memory flat in the number of attempts).
    Attempts, gradings and comparisons come out as typed, immutable records: a read record cannot
    be changed in place (and the change silently lost); store a new one by assigning it."""

    paths: RunPaths
    meta: RunMeta
    attempts: RecordStore[Key, AttemptRecord] = field(init=False)
    trial_grades: RecordStore[Key, TrialGrading] = field(init=False)
    comparisons: RecordStore[tuple[str, str], CaseComparison] = field(default_factory=_comparisons)

    def __post_init__(self) -> None:
        meta: Any = self.meta
        if not isinstance(meta, RunMeta):  # run.json's head as JSON: decoded here, once
            self.meta = RunMeta.from_json(meta)
        keys: KeyIndex[Key] = KeyIndex()  # an attempt and its grading share one key
        self.attempts = RecordStore(summarize=ending_of, keys=keys, codec=_ATTEMPT)
        self.trial_grades = RecordStore(keys=keys, codec=_GRADING, summarize=_status)
        if not self.comparisons:
            self.comparisons = _comparisons(keys)

    def adopt_attempts(self, attempts: RecordStore[Key, AttemptRecord]) -> None:
        """Take another run's attempt records as they are (a regrade grades the same attempts);
        grading starts empty."""
        self.attempts = attempts
        self.trial_grades = RecordStore(keys=attempts.key_index, codec=_GRADING, summarize=_status)
        if not self.comparisons:
            self.comparisons = _comparisons(attempts.key_index)

    @property
    def root(self) -> str:
        """The run directory as a string, for joining per-trial paths (cheaper than pathlib)."""
        return os.fspath(self.paths.root)

    @property
    def id(self) -> str:
        return self.meta.id

    def ending(self, key: Key) -> endings.Ending:
        """Kept in memory when the attempt is stored: readers never decode a record for it."""
        ending: endings.Ending = self.attempts.summary(key)
        return ending

    def write(self) -> None:
        """run.json: the metadata and every attempt once, in key order, each as it is stored."""
        head, parts = self.meta.file_head()
        write_record_file(self.paths.run_json, head, "attempts", self.attempts.raw_in_key_order(), parts=parts)


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
    snapshot = read_record_file(paths.run_json, "run.json", "attempts")
    meta = snapshot.head
    try:
        _RunFile.model_validate({**meta, "schema_": meta.get("schema")})
    except ValidationError as exc:
        err = exc.errors(include_input=False)[0]
        loc = ".".join(str(p) for p in err["loc"]).replace("schema_", "schema")
        raise UserError(Problem(str(paths.run_json), f"run.json is not a {RUN_SCHEMA} file: {err['msg']}",
                                loc)) from None
    run = Run(paths, RunMeta.from_json(meta))
    journal = str(paths.attempts)
    for lineno, rec, raw in read_journal_lines(paths.attempts, repair=repair):
        _add_attempt(run, rec, raw, journal, ("line", lineno))
    journaled = len(run.attempts) > 0
    snapshot_file = str(paths.run_json)
    for i, (rec, line) in enumerate(snapshot.records()):
        where = ("line", line) if line is not None else ("attempts", i)
        _add_attempt(run, rec, None, snapshot_file, where, only_new=journaled)
    if grading:
        _load_grading(run, repair=repair)
    return run


def _add_attempt(run: Run, rec: Any, raw: bytes | None, file: str, where: tuple[str, int], *,
                 only_new: bool = False) -> None:
    """Store an attempt read from ``file`` at ``where`` (("line", n) or ("attempts", index));
    ``raw`` is its bytes when they are its encoding, so it is not encoded again."""
    try:
        key = key_of(rec)
        if only_new and key in run.attempts:
            return
        if "ending" not in rec:
            attempt_record(rec, endings.from_record(rec))  # an old run: map its ending once, when read
            raw = None
        record = AttemptRecord.from_json(rec)
        run.attempts.put(key, record, raw if raw is not None else orjson.dumps(rec))  # checks its ending
    except (KeyError, TypeError, ValueError) as exc:
        place = f"line {where[1]}" if where[0] == "line" else f"attempts[{where[1]}]"
        raise UserError(Problem(file, f"corrupt attempt record ({place}): {exc}")) from None


def _load_grading(run: Run, *, repair: bool) -> None:
    """The gradings and comparisons, decoded once here; each kept with the bytes it was read as.

    results.json and comparisons.json are snapshots of grading.jsonl, which keeps every record:
    a resume (``repair``) rebuilds from the journal when a snapshot is unreadable."""
    rebuild = repair and run.paths.grading_journal.is_file()
    if run.paths.results.is_file():
        with _snapshot_or_journal(rebuild):
            for rec, _ in read_record_file(run.paths.results, "results.json", "trials").records():
                _put(run.trial_grades, TrialGrading, rec, str(run.paths.results))
    if run.paths.comparisons.is_file():
        with _snapshot_or_journal(rebuild):
            for rec, _ in read_record_file(run.paths.comparisons, "comparisons.json", "comparisons").records():
                _put(run.comparisons, CaseComparison, rec, str(run.paths.comparisons))
    for rec in read_journal(run.paths.grading_journal, repair=repair):
        if rec.get("kind") == "pairwise":
            _put(run.comparisons, CaseComparison, rec, str(run.paths.grading_journal))
        else:
            _put(run.trial_grades, TrialGrading, rec, str(run.paths.grading_journal))


def _put(store: RecordStore[Any, Any], cls: type[TrialGrading] | type[CaseComparison], rec: Any, file: str) -> None:
    try:
        record = cls.from_json(rec)
    except ValueError as exc:
        raise UserError(Problem(file, f"corrupt {cls.__name__} record: {exc}")) from None
    store.put(record.key, record, orjson.dumps(rec))


@contextmanager
def _snapshot_or_journal(rebuild: bool) -> Iterator[None]:
    """Read a snapshot; when it is corrupt and ``rebuild``, go on without it (the journal that
    follows holds the same records, and the snapshot is written again at the end)."""
    try:
        yield
    except (UserError, KeyError, TypeError, ValueError):
        if not rebuild:
            raise
