"""The resolved eval: what the coordinator computes once and every later step reads.

Plain frozen dataclasses (inside the edge). Resolution loads datasets and plugins, applies
eval-level assertions and judges to each case, and gives every judge an identity, so a
resumed grading can tell a verdict from the same judge from one by a changed judge.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, overload

import orjson

from mst._columns import ColumnPairs
from mst.config.models import Assertion, EvalConfig, VariantConfig


@dataclass(frozen=True)
class ResolvedJudge:
    """A code judge ready to call. ``identity`` digests its definition and plugin version."""

    id: str
    target: str  # "module:function" or the entry-point name
    source: str  # "code", "plugin", or a judge kind of mst.grading.judges.JUDGE_KINDS ("llm")
    options: dict[str, Any]
    threshold: float
    version: str  # plugin package version, or a digest of the judge's module file
    identity: str
    secrets: tuple[str, ...] = ()  # the --secrets-file names it reads (not part of its identity)


_Task = tuple[str, Any, dict[str, Any]]


def _task_json(prompt: str, expected: Any, metadata: dict[str, Any]) -> bytes | None:
    """The task's JSON bytes (orjson's output, with its spare room) when they read back as the
    very same values (a dataset row's strings, numbers, lists and objects); None when they would
    not (a YAML date, a tuple, ...): such a task is kept as it is."""
    task = (prompt, expected, metadata)
    try:
        raw = orjson.dumps(task)
    except TypeError:
        return None
    if prompt.__class__ is str and metadata.__class__ is dict and not metadata and _plain(expected):
        # Most dataset rows: nothing that could read back otherwise, so no decode to compare
        # (the round trip cost 3-4x the encoding; bench/perf16_percase.md).
        return raw
    back = orjson.loads(raw)
    return raw if back == list(task) and _same_types(back, list(task)) else None


def _packed_task(prompt: str, expected: Any, metadata: dict[str, Any]) -> bytes | _Task:
    """The case's task as its JSON bytes when they read back the same (:func:`_task_json`),
    else as it is."""
    raw = _task_json(prompt, expected, metadata)
    return (prompt, expected, metadata) if raw is None else bytes(memoryview(raw))  # right-sized


def _plain(value: Any) -> bool:
    """A value JSON gives back as the very same value of the very same type."""
    c = value.__class__
    if c is str or c is bool or value is None:
        return True
    if c is int:
        return bool(-(1 << 63) <= value < (1 << 64))  # orjson's range; larger ones fail to encode
    return c is float and math.isfinite(value)  # nan and the infinities encode as null


def _same_types(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return all(_same_types(a[k], b[k]) for k in a)
    if type(a) is list:
        return all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return True


class ResolvedCase:
    """One case, resolved: its task (prompt, expected, metadata) is kept as its JSON bytes, a
    third of what the decoded row costs, and decoded when read (once per attempt or grading; a
    fresh copy each time, so no reader changes it for the next). Immutable, and equal by its
    fields, like a frozen dataclass. A resolved eval's cases are not kept as these (see
    :class:`CaseTable`): it makes one, a view of its row, each time a case is read.
    """

    __slots__ = ("_table", "_task", "assertions", "id", "judges", "mock", "trials")

    id: str
    trials: int
    assertions: tuple[Assertion, ...]
    judges: tuple[ResolvedJudge, ...]
    mock: dict[str, Any] | None
    _task: bytes | _Task | int  # an int: the row of ``_table`` that holds the task
    _table: CaseTable | None

    def __init__(self, id: str, prompt: str, expected: Any, metadata: dict[str, Any], trials: int,
                 assertions: tuple[Assertion, ...], judges: tuple[ResolvedJudge, ...],
                 mock: dict[str, Any] | None = None) -> None:
        # Through the slots' own setters (_SET, below): ``object.__setattr__`` looks each name up
        # first. The id is not interned (see CaseTable.add).
        _fill(self, id, trials, assertions, judges, mock, _packed_task(prompt, expected, metadata), None)

    def task(self) -> tuple[str, Any, dict[str, Any]]:
        """(prompt, expected, metadata) from one decode: an attempt reads all three, and each
        property below decodes the whole task again."""
        task = self._task
        if type(task) is int:  # a view of a table's row: the most read, decoded with no call between
            assert self._table is not None
            return self._table.task_at(task)
        if type(task) is bytes:
            prompt, expected, metadata = orjson.loads(task)
            return prompt, expected, metadata
        assert type(task) is tuple
        return task

    @property
    def prompt(self) -> str:
        return self.task()[0]

    @property
    def expected(self) -> Any:
        return self.task()[1]

    @property
    def metadata(self) -> dict[str, Any]:
        return self.task()[2]

    def _fields(self) -> tuple[Any, ...]:
        return (self.id, *self.task(), self.trials, self.assertions, self.judges, self.mock)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ResolvedCase is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ResolvedCase is immutable (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        return type(other) is ResolvedCase and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[Any, ...]:
        return ResolvedCase, self._fields()

    def __repr__(self) -> str:
        prompt, expected, metadata = self.task()
        return (f"ResolvedCase(id={self.id!r}, prompt={prompt!r}, expected={expected!r}, metadata={metadata!r}, "
                f"trials={self.trials!r}, assertions={self.assertions!r}, judges={self.judges!r}, mock={self.mock!r})")


_SET: Final = tuple(ResolvedCase.__dict__[name].__set__
                    for name in ("id", "trials", "assertions", "judges", "mock", "_task", "_table"))


def _fill(case: ResolvedCase, id: str, trials: int, assertions: tuple[Assertion, ...],
          judges: tuple[ResolvedJudge, ...], mock: dict[str, Any] | None, task: bytes | _Task | int,
          table: CaseTable | None) -> ResolvedCase:
    """Set a new case's slots."""
    set_id, set_trials, set_assertions, set_judges, set_mock, set_task, set_table = _SET
    set_id(case, id)
    set_trials(case, trials)
    set_assertions(case, assertions)
    set_judges(case, judges)
    set_mock(case, mock)
    set_task(case, task)
    set_table(case, table)
    return case


class _View(ResolvedCase):
    """A case being made as a view of a :class:`CaseTable` row: the same slots, but plain
    attribute stores (what :class:`ResolvedCase` refuses), then made a ``ResolvedCase`` by one
    ``__class__`` store: ~4.0 k instructions a view, ~8.8 k through the slots' setters (a view is made
    ~15 times a case in a run; issue 16, bench/perf16_collect.md "Session 11")."""

    __slots__ = ()
    __setattr__ = object.__setattr__  # type: ignore[assignment]
    __delattr__ = object.__delattr__  # type: ignore[assignment]  # both, or stores take the slow path
    __init__ = object.__init__  # type: ignore[assignment]  # made by calling the class: cheaper than object.__new__


_Profile = tuple[tuple[Assertion, ...], tuple[ResolvedJudge, ...]]


class CaseTable(Sequence[ResolvedCase]):
    """A resolved eval's cases, held as columns: the ids (a list of the strings), the trial
    counts (an array), every task's JSON bytes one after another in one buffer (an array of
    where each ends), and a code per case into the distinct (assertions, judges) pairs, which
    resolution shares between cases (most have the eval's own). Rare parts are kept by row: a
    mock script, a task JSON would change. An object per case with its own bytes and an
    interned id held ~270 bytes a case of a 100,000-case run, these ~120 (issue 16,
    bench/perf16_memory.md).

    Reads as a tuple of :class:`ResolvedCase`: each read makes the case afresh, a view of its
    row (equal to the case it was made from, not the same object each time). Built once, by
    :meth:`add`, then only read. :meth:`find` looks a case up by id."""

    __slots__ = ("_codes", "_ends", "_ids", "_mocks", "_odd", "_order", "_profile_of", "_profiles", "_tasks",
                 "_trials")

    def __init__(self, cases: Iterable[ResolvedCase] = ()) -> None:
        self._ids: list[str] = []
        self._trials = array("I")
        self._tasks = bytearray()
        self._ends = array("I")  # where each task ends in _tasks ("q" once past 4 GiB)
        self._codes = array("I")  # the row's index into _profiles
        self._profiles: list[_Profile] = []
        self._profile_of: dict[tuple[int, int], int] = {}  # by the tuples' ids (the list keeps them)
        self._mocks: dict[int, dict[str, Any]] = {}
        self._odd: dict[int, _Task] = {}  # tasks JSON would not give back the same
        self._order: array[int] | None = None  # rows sorted by id, made by the first find
        for case in cases:
            self.add(case.id, *case.task(), case.trials, case.assertions, case.judges, case.mock)

    def add(self, case_id: str, prompt: str, expected: Any, metadata: dict[str, Any], trials: int,
            assertions: tuple[Assertion, ...], judges: tuple[ResolvedJudge, ...],
            mock: dict[str, Any] | None = None) -> None:
        """Append a case (the arguments of :class:`ResolvedCase`)."""
        row = len(self._ids)
        # Not interned: the run's keys are made from these very strings, and the interpreter's
        # dict of interned strings grew ~46 bytes a case (issue 16).
        self._ids.append(case_id)
        self._trials.append(trials)
        raw = _task_json(prompt, expected, metadata)
        if raw is None:
            self._odd[row] = (prompt, expected, metadata)
        else:
            self._tasks += raw
        end = len(self._tasks)
        if end >= 1 << 32 and self._ends.typecode == "I":
            self._ends = array("q", self._ends)
        self._ends.append(end)
        key = (id(assertions), id(judges))
        code = self._profile_of.get(key)
        if code is None:
            code = self._profile_of[key] = len(self._profiles)
            self._profiles.append((assertions, judges))
        self._codes.append(code)
        if mock is not None:
            self._mocks[row] = mock
        self._order = None

    def task_at(self, row: int) -> _Task:
        """Row ``row``'s (prompt, expected, metadata), decoded afresh."""
        odd = self._odd.get(row) if self._odd else None
        if odd is not None:
            return odd
        start = self._ends[row - 1] if row else 0
        prompt, expected, metadata = orjson.loads(self._tasks[start:self._ends[row]])
        return prompt, expected, metadata

    def _case(self, row: int) -> ResolvedCase:
        case: ResolvedCase = _View()
        case.assertions, case.judges = self._profiles[self._codes[row]]
        case.id = self._ids[row]
        case.trials = self._trials[row]
        case.mock = self._mocks.get(row) if self._mocks else None
        case._task = row
        case._table = self
        case.__class__ = ResolvedCase  # immutable from here on
        return case

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> ResolvedCase: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ResolvedCase, ...]: ...

    def __getitem__(self, index: int | slice) -> ResolvedCase | tuple[ResolvedCase, ...]:
        if isinstance(index, slice):
            return tuple(map(self._case, range(*index.indices(len(self._ids)))))
        return self._case(range(len(self._ids))[index])  # negative indexes, IndexError

    def __iter__(self) -> Iterator[ResolvedCase]:
        return map(self._case, range(len(self._ids)))

    @property
    def ids(self) -> Sequence[str]:
        """The case ids, in order (the list held: not to be changed)."""
        return self._ids

    @property
    def trials(self) -> Sequence[int]:
        """Each case's trial count, in order (the array held: not to be changed); a loop that
        reads only ids and trials reads the columns, with no case made per row."""
        return self._trials

    @property
    def profiles(self) -> Sequence[_Profile]:
        """The distinct (assertions, judges) pairs the cases hold, in the order of their first
        case (the list held: not to be changed): a loop over every case's judges reads these,
        with no case made per row."""
        return self._profiles

    def id_trials(self) -> ColumnPairs[str, int]:
        """``(id, trials)`` of every case, in order, read from the columns held (no copy)."""
        return ColumnPairs(self._ids, self._trials)

    def find(self, case_id: str) -> ResolvedCase | None:
        """The case of id ``case_id``, None when there is none: a binary search of the rows
        sorted by id (4 bytes a case, sorted once), not a dict of every case kept alive."""
        order = self._order
        if order is None:
            ids = self._ids
            order = self._order = array("I", sorted(range(len(ids)), key=ids.__getitem__))
        at = bisect_left(order, case_id, key=self._ids.__getitem__)
        if at < len(order) and self._ids[order[at]] == case_id:
            return self._case(order[at])
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CaseTable | tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"CaseTable({len(self)} cases)"


@dataclass(frozen=True)
class ResolvedEval:
    config: EvalConfig
    path: Path  # the eval file
    base_dir: Path  # the eval file's directory: code judges and relative paths resolve here
    digest: str  # sha256 of the eval file's bytes
    cases: CaseTable  # given as any sequence of cases, kept as a CaseTable
    pairwise: ResolvedJudge | None
    client_settings: dict[str, Any] = field(default_factory=dict)  # variant id -> validated settings
    graders: Any = None  # mst.graders.GradersConfig

    def __post_init__(self) -> None:
        if not isinstance(self.cases, CaseTable):
            object.__setattr__(self, "cases", CaseTable(self.cases))

    @property
    def variants(self) -> list[VariantConfig]:
        return self.config.variants

    @property
    def baseline(self) -> VariantConfig | None:
        return next((v for v in self.config.variants if v.baseline), None)

    def case(self, case_id: str) -> ResolvedCase:
        """A case by id (KeyError when there is none), in O(log n): see :meth:`CaseTable.find`."""
        case = self.cases.find(case_id)
        if case is None:
            raise KeyError(case_id)
        return case
