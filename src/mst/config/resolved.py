"""The resolved eval: what the coordinator computes once and every later step reads.

Plain frozen dataclasses (inside the edge). Resolution loads datasets and plugins, applies
eval-level assertions and judges to each case, and gives every judge an identity, so a
resumed grading can tell a verdict from the same judge from one by a changed judge.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

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


def _packed_task(prompt: str, expected: Any, metadata: dict[str, Any]) -> bytes | _Task:
    """The case's task as its JSON bytes when that reads back as the very same values (a dataset
    row's strings, numbers, lists and objects), else as it is (a YAML date, a tuple, ...)."""
    task = (prompt, expected, metadata)
    try:
        raw = orjson.dumps(task)
    except TypeError:
        return task
    if prompt.__class__ is str and metadata.__class__ is dict and not metadata and _plain(expected):
        # Most dataset rows: nothing that could read back otherwise, so no decode to compare
        # (the round trip cost 3-4x the encoding; bench/perf16_percase.md).
        return bytes(memoryview(raw))
    back = orjson.loads(raw)
    same = back == list(task) and _same_types(back, list(task))
    return bytes(memoryview(raw)) if same else task  # right-sized: orjson's output keeps spare room


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
    """One case, resolved. An eval may have a hundred thousand, each alive for the whole run: its
    task (prompt, expected, metadata) is kept as its JSON bytes, a third of what the decoded row
    costs, and decoded when read (once per attempt or grading; a fresh copy each time, so no
    reader changes it for the next). Immutable, and equal by its fields, like a frozen dataclass.
    """

    __slots__ = ("_task", "assertions", "id", "judges", "mock", "trials")

    id: str
    trials: int
    assertions: tuple[Assertion, ...]
    judges: tuple[ResolvedJudge, ...]
    mock: dict[str, Any] | None
    _task: bytes | _Task

    def __init__(self, id: str, prompt: str, expected: Any, metadata: dict[str, Any], trials: int,
                 assertions: tuple[Assertion, ...], judges: tuple[ResolvedJudge, ...],
                 mock: dict[str, Any] | None = None) -> None:
        # Through the slots' own setters (_SET, below): ``object.__setattr__`` looks each name up
        # first, and a big eval makes a hundred thousand of these.
        set_id, set_trials, set_assertions, set_judges, set_mock, set_task = _SET
        set_id(self, sys.intern(id))  # the same string as the run's keys and records hold
        set_trials(self, trials)
        set_assertions(self, assertions)
        set_judges(self, judges)
        set_mock(self, mock)
        set_task(self, _packed_task(prompt, expected, metadata))

    def _unpacked(self) -> _Task:
        task = self._task
        if type(task) is bytes:
            prompt, expected, metadata = orjson.loads(task)
            return prompt, expected, metadata
        assert type(task) is tuple
        return task

    def task(self) -> tuple[str, Any, dict[str, Any]]:
        """(prompt, expected, metadata) from one decode: an attempt reads all three, and each
        property below decodes the whole task again."""
        return self._unpacked()

    @property
    def prompt(self) -> str:
        return self._unpacked()[0]

    @property
    def expected(self) -> Any:
        return self._unpacked()[1]

    @property
    def metadata(self) -> dict[str, Any]:
        return self._unpacked()[2]

    def _fields(self) -> tuple[Any, ...]:
        return (self.id, *self._unpacked(), self.trials, self.assertions, self.judges, self.mock)

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
        prompt, expected, metadata = self._unpacked()
        return (f"ResolvedCase(id={self.id!r}, prompt={prompt!r}, expected={expected!r}, metadata={metadata!r}, "
                f"trials={self.trials!r}, assertions={self.assertions!r}, judges={self.judges!r}, mock={self.mock!r})")


_SET: Final = tuple(ResolvedCase.__dict__[name].__set__
                    for name in ("id", "trials", "assertions", "judges", "mock", "_task"))


@dataclass(frozen=True)
class ResolvedEval:
    config: EvalConfig
    path: Path  # the eval file
    base_dir: Path  # the eval file's directory: code judges and relative paths resolve here
    digest: str  # sha256 of the eval file's bytes
    cases: tuple[ResolvedCase, ...]
    pairwise: ResolvedJudge | None
    client_settings: dict[str, Any] = field(default_factory=dict)  # variant id -> validated settings
    graders: Any = None  # mst.graders.GradersConfig

    @property
    def variants(self) -> list[VariantConfig]:
        return self.config.variants

    @property
    def baseline(self) -> VariantConfig | None:
        return next((v for v in self.config.variants if v.baseline), None)

    def case(self, case_id: str) -> ResolvedCase:
        """A case by id, in O(1): callers look cases up once per trial."""
        by_id: dict[str, ResolvedCase] | None = self.__dict__.get("_by_id")
        if by_id is None:
            by_id = {c.id: c for c in self.cases}
            object.__setattr__(self, "_by_id", by_id)
        return by_id[case_id]
