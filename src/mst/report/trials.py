"""The report's per-trial evidence, in chunk files next to ``report.html`` (docs/report.md).

The page itself carries only the figures and the case × variant matrix, so it stays small for a
run of any size; a trial's transcript, verdicts, ending and artifacts are written to
``report/<generation>/c<N>.js``, one file per group of cases, and loaded with a ``<script>`` tag
when a cell is opened. A script tag (not ``fetch``) is what a browser allows from ``file://``.

The records are copied as the run stores them (already redacted, already JSON), never decoded
and encoded again: a 20,000-attempt run is written in well under its time budget. A transcript
over :data:`TRANSCRIPT_BUDGET` bytes keeps its head and tail and says, in a marker event the page
shows, how many events were cut and where the whole transcript is.
"""

from __future__ import annotations

import os
import shutil
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson

from mst._columns import ColumnPairs
from mst.fileio import read_bytes
from mst.runs.layout import Key, RunPaths
from mst.runs.run import Run

CASES_PER_CHUNK: Final = 16
TRANSCRIPT_BUDGET: Final = 512 * 1024  # bytes of transcript events per trial in the report
MAX_ARTIFACTS: Final = 200  # files listed per trial (the rest counted, with a marker)
CUT_EVENT: Final = "report.cut"
NO_ARTIFACTS: Final = b'{"files":[],"more":0}'  # list_artifacts of a trial without artifacts, as JSON
_CHUNK_BUFFER: Final = 64 * 1024  # bytes a chunk file is written in


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """Which chunk file holds a case: case ``i`` of the run is in ``c{i // size}.js``."""

    size: int = CASES_PER_CHUNK

    def name(self, index: int) -> str:
        return f"c{index // self.size}.js"


def write_chunks(run: Run, case_ids: Sequence[str], folder: Path, plan: ChunkPlan = ChunkPlan()) -> int:
    """Write every chunk of the run's trials into ``folder``; the number of files written."""
    folder.mkdir(parents=True, exist_ok=True)
    by_case: dict[str, list[Key]] = {}
    for key in run.attempts:
        by_case.setdefault(key[1], []).append(key)
    slot_of = run.attempts.slot_of
    written = 0
    for start in range(0, len(case_ids), plan.size):
        group = case_ids[start:start + plan.size]
        _write_chunk(folder / plan.name(start),
                     [_case_entry(run, case, [(key, slot_of(key)) for key in sorted(by_case.get(case, ()))])
                      for case in group])
        written += 1
    return written


def _write_chunk(path: Path, entries: Sequence[bytes]) -> None:
    """``mstChunk({entry,entry,...});`` written a piece at a time: joining the entries and
    wrapping them made two more copies of a chunk that holds 16 cases' transcripts (the peak
    of a run with many trials a case; bench/README.md, session 13). A buffer of 64 KiB, not
    the default 8: a case's entry (a few KB) then rarely is a write call of its own (one per case
    before, bench/README.md, session 14)."""
    with path.open("wb", buffering=_CHUNK_BUFFER) as out:
        out.write(b"mstChunk({")
        for i, entry in enumerate(entries):
            if i:
                out.write(b",")
            out.write(entry)
        out.write(b"});\n")


class CaseList(ColumnPairs[str, int]):
    """``(case id, trials)`` of a run's cases, in the eval's order, as a list of ids and an
    array of trial counts: ~12 bytes a case where a list of tuples costs 64, held from grading
    to the report (issue 16)."""

    __slots__ = ()

    def __init__(self, cases: Iterable[tuple[str, int]] = ()) -> None:
        super().__init__([], array("I"))
        for case, trials in cases:
            self.append(case, trials)


@dataclass
class ChunkStream:
    """The chunks written while grading goes case by case, in the eval's case order
    (``grade_run``, docs/report.md): grading hands over each record it stored and each transcript
    it read (:meth:`graded`, :meth:`compared`), so the report neither reads nor decodes them
    again. A case grading had nothing to do for is written from its files, as
    :func:`write_chunks` does. The chunks are derived data: a stream
    cut short (a crash) leaves a generation folder the next report removes; one that met a trial
    outside its cases' keys is not :attr:`whole`, and the report is then written afresh.

    ``cases`` are ``(case id, trials)`` in the eval's order, ``variants`` the eval's variant ids."""

    run: Run
    cases: Sequence[tuple[str, int]]
    variants: Sequence[str]
    folder: Path
    plan: ChunkPlan = ChunkPlan()
    whole: bool = True
    _next: int = 0  # the index in ``cases`` of the next case to write
    _entries: list[bytes] = field(default_factory=list)  # the current chunk's case entries
    _graded: dict[Key, tuple[bytes, bytes | None]] = field(default_factory=dict)  # the current case's
    _compared: dict[str, bytes] = field(default_factory=dict)  # the current case's comparisons, by candidate
    _keys: int = 0  # the attempts written so far

    @property
    def case_ids(self) -> list[str]:
        return [case for case, _ in self.cases]

    def graded(self, key: Key, grade: bytes, transcript: bytes | None) -> None:
        """``grade``: the trial's record as just stored; ``transcript``: the bytes of its
        transcript as grading read them, when plain JSONL (one event per line, each decoded by
        grading). Both are copied as they are: neither read back nor decoded again (a record
        just stored would be written out and read back from the store's spill file)."""
        self._graded[key] = (grade, transcript)

    def compared(self, key: tuple[str, str], comparison: bytes) -> None:
        """``comparison``: the ``(candidate, case)`` comparison's record as just stored."""
        self._compared[key[0]] = comparison

    def case_done(self, case_id: str) -> None:
        """Every record of ``case_id`` is stored: write its entry (and those of the cases
        before it that grading did not visit)."""
        while self.whole and self._next < len(self.cases):
            current = self.cases[self._next]
            self._add(current, held=current[0] == case_id)  # the records in hand are the done case's only
            if current[0] == case_id:
                return
        self.whole = False  # a case out of the eval's order (trials it no longer lists)
        self._graded.clear()
        self._compared.clear()

    def close(self) -> bool:
        """Write the cases left and the last chunk; whether the chunks hold every attempt."""
        while self.whole and self._next < len(self.cases):
            self._add(self.cases[self._next])
        self.whole = self.whole and self._keys == len(self.run.attempts)
        if self.whole:
            self.folder.mkdir(parents=True, exist_ok=True)  # as write_chunks: there even for no case
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        return self.whole

    def _add(self, current: tuple[str, int], *, held: bool = False) -> None:
        """Write the next case's entry (``current``: its id and trials, as read by the caller),
        from the records in hand when ``held``."""
        case, trials = current
        attempts = self.run.attempts
        slot_of, holds = attempts.slot_of, attempts.holds
        keys = [(key, slot) for v in self.variants for t in range(trials)
                if holds(slot := slot_of(key := (v, case, t)))]
        self._keys += len(keys)
        self._entries.append(_case_entry(self.run, case, keys, self._graded, self._compared) if held
                             else _case_entry(self.run, case, keys))
        if held:
            self._graded.clear()
            self._compared.clear()
        self._next += 1
        if len(self._entries) == self.plan.size or self._next == len(self.cases):
            self.folder.mkdir(parents=True, exist_ok=True)
            _write_chunk(self.folder / self.plan.name(self._next - 1), self._entries)
            self._entries.clear()


def _case_entry(run: Run, case: str, keys: list[tuple[Key, int | None]],
                graded: Mapping[Key, tuple[bytes, bytes | None]] | None = None,
                compared: Mapping[str, bytes] | None = None) -> bytes:
    """The case's trials (each key with its slot in the attempts, looked up once) and
    comparisons; ``graded`` and ``compared`` are records (and transcripts) in hand, the others
    are read from the run."""
    graded, compared = graded or {}, compared or {}
    trials = b",".join(orjson.dumps(f"{key[0]}/{key[2]}") + b":" + _trial(run, key, slot, graded.get(key))
                       for key, slot in keys)
    comparisons = run.comparisons
    pairs = [orjson.dumps(v) + b":" + _comparison(run, (v, case), compared)
             for v in sorted({k[0] for k, _ in keys})
             if v in compared or (len(comparisons) and (v, case) in comparisons)]  # none held: none looked up
    return orjson.dumps(case) + b':{"trials":{' + trials + b'},"pairs":{' + b",".join(pairs) + b"}}"


def _comparison(run: Run, key: tuple[str, str], compared: Mapping[str, bytes]) -> bytes:
    held = compared.get(key[0])
    return held if held is not None else run.comparisons.raw(key)


def _trial(run: Run, key: Key, slot: int | None, held: tuple[bytes, bytes | None] | None = None) -> bytes:
    """The trial's entry; ``slot``: its attempt's (:meth:`RecordStore.slot_of`), its grading's
    too when the stores share their keys (a run's do)."""
    attempts = run.attempts
    attempt = attempts.raw_at(slot)
    if held is not None:
        grade, transcript = held
    else:
        grades = run.trial_grades
        at = slot if grades.key_index is attempts.key_index else grades.slot_of(key)
        grade, transcript = (grades.raw_at(at) if grades.holds(at) else b"null"), None
    record = orjson.loads(attempt)
    events = transcript_json(run.paths, record.get("transcript"), plain=transcript)
    rel = record.get("artifacts")
    artifacts = orjson.dumps(list_artifacts(run.paths, rel)) if rel else NO_ARTIFACTS  # most trials have none
    return (b'{"attempt":' + attempt + b',"grade":' + grade + b',"transcript":' + events
            + b',"artifacts":' + artifacts + b"}")


def transcript_json(paths: RunPaths, rel: str | None, budget: int = TRANSCRIPT_BUDGET, *,
                    plain: bytes | None = None) -> bytes:
    """The transcript's events as one JSON array (``null`` without a transcript), cut in the
    middle with a :data:`CUT_EVENT` marker when over ``budget`` bytes. ``plain`` is the file's
    content already read and known to be plain JSONL (one JSON value per line, each ending in a
    newline: what grading read), so it is neither read nor decoded again."""
    if not rel:
        return b"null"
    if plain is not None and len(plain) <= budget:
        return b"[" + plain.rstrip(b"\n").replace(b"\n", b",") + b"]"
    try:
        data = plain if plain is not None else read_bytes(f"{paths.root}/{rel}")
    except OSError as exc:
        return orjson.dumps([_marker(f"the transcript {rel} cannot be read: {exc.strerror}", 0, rel)])
    if len(data) <= budget:
        # Plain JSONL (what mst writes): the lines joined by commas are the array, and one
        # decode proves it; anything else takes the line-by-line way below.
        joined = b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]"
        try:
            orjson.loads(joined)
        except orjson.JSONDecodeError:
            pass
        else:
            return joined
    lines = [line for line in data.split(b"\n") if line.strip()]
    joined = b"[" + b",".join(lines) + b"]"
    try:
        orjson.loads(joined)  # one pass to prove the copy is valid JSON
    except orjson.JSONDecodeError:
        lines = list(_valid_lines(lines, rel))
    if len(data) <= budget:
        return b"[" + b",".join(lines) + b"]"
    return b"[" + b",".join(_cut(lines, budget, rel)) + b"]"


def _valid_lines(lines: list[bytes], rel: str) -> Iterator[bytes]:
    for number, line in enumerate(lines, 1):
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            yield orjson.dumps(_marker(f"line {number} of {rel} is not JSON", 0, rel))
        else:
            yield line


def _cut(lines: list[bytes], budget: int, rel: str) -> list[bytes]:
    """Head and tail within ``budget`` bytes, and the marker between them."""
    half = budget // 2
    head: list[bytes] = []
    size = 0
    for line in lines:
        if size + len(line) > half:
            break
        head.append(line)
        size += len(line)
    tail: list[bytes] = []
    size = 0
    for line in reversed(lines[len(head):]):
        if size + len(line) > half:
            break
        tail.append(line)
        size += len(line)
    tail.reverse()
    cut = len(lines) - len(head) - len(tail)
    note = f"[… {cut} events cut: transcript over the report's budget of {budget} bytes; the whole file is {rel} …]"
    return [*head, orjson.dumps(_marker(note, cut, rel)), *tail]


def _marker(text: str, events: int, rel: str) -> dict[str, object]:
    return {"type": CUT_EVENT, "data": {"text": text, "events": events, "path": rel},
            "provenance": {"component": "mst"}}


def list_artifacts(paths: RunPaths, rel: str | None, limit: int = MAX_ARTIFACTS) -> dict[str, object]:
    """The trial's artifact files (paths relative to the run, sizes), at most ``limit`` of them,
    with how many more there are."""
    files: list[list[object]] = []
    more = 0
    if rel:
        root = paths.root / rel
        for folder, _dirs, names in os.walk(root):
            for name in sorted(names):
                if len(files) >= limit:
                    more += 1
                    continue
                full = Path(folder) / name
                try:
                    size = full.stat().st_size
                except OSError:
                    size = None
                files.append([str(full.relative_to(paths.root)), size])
    return {"files": files, "more": more}
