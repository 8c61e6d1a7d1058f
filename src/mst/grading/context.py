"""What one run's grading computes once and every trial reads: the per-run grading context.

A run grades tens of thousands of trials with one resolved eval. The names and identities of a
case's assertions and judges, the graders' manifest (and its encoded bytes), the judges set that
``--resume`` compares, and the redactor are made once here and passed explicitly, so nothing is
cached in module globals keyed by object ids, and two runs in one process cannot see each other's.
The one module-level memo, the eval's judges (``_EvalJudges``), holds a weak reference to the
resolved eval itself and is checked by identity: another eval reads its own.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson

from mst.config.models import Assertion
from mst.config.resolved import ResolvedCase, ResolvedEval, ResolvedJudge
from mst.grading.assertions import assertion_identity, assertion_name
from mst.grading.judge_access import JudgeAccess
from mst.grading.judges import CaseView, TrialView
from mst.session.redact import NO_REDACTION, Redactor

if TYPE_CHECKING:
    from mst.graders.config import GradersConfig
    from mst.session.events import Event


class CasePlan:
    """A case's graders as grading walks them: its view, and the unique names and identities of its
    assertions and judges (shared by the cases that have the same ones).

    The view is made when first read: only a judge reads it, and making it decodes the case's
    packed task, once per case graded (a second decode beside the trial's own,
    :meth:`TrialView.of`) in an eval of assertions and graders alone."""

    __slots__ = ("_case", "_view", "assertions", "judges")

    assertions: tuple[tuple[str, str, Assertion], ...]  # (name, identity, assertion)
    judges: tuple[tuple[str, ResolvedJudge], ...]  # (name, judge)

    def __init__(self, case: ResolvedCase, assertions: tuple[tuple[str, str, Assertion], ...],
                 judges: tuple[tuple[str, ResolvedJudge], ...]) -> None:
        self._case: ResolvedCase | None = case
        self._view: CaseView | None = None
        self.assertions, self.judges = assertions, judges

    @classmethod
    def of(cls, case: ResolvedCase) -> CasePlan:
        return cls(case, *_named(case.assertions, case.judges))

    @property
    def view(self) -> CaseView:
        """The case as a judge sees it (:class:`CaseView`), made once; the case is then let go."""
        view = self._view
        if view is None:
            assert self._case is not None
            view = self._view = CaseView.of(self._case)
            self._case = None
        return view

    def names(self) -> list[tuple[str, str]]:
        """(name, identity) of every assertion and judge, in grading order."""
        return [(n, i) for n, i, _ in self.assertions] + [(n, j.identity) for n, j in self.judges]


_Named = tuple[tuple[tuple[str, str, Assertion], ...], tuple[tuple[str, ResolvedJudge], ...]]


def _named(assertions: tuple[Assertion, ...], judges: tuple[ResolvedJudge, ...]) -> _Named:
    """Unique names and identities of a case's assertions and judges, in grading order."""
    seen: dict[str, int] = {}

    def unique(name: str) -> str:
        # Two unnamed assertions of one type are both "contains"; number the later ones so
        # verdicts (and resume's `keep`) can tell them apart, stably across runs.
        count = seen.get(name, 0) + 1
        seen[name] = count
        return name if count == 1 else f"{name}#{count}"

    named = tuple((unique(assertion_name(a)), assertion_identity(a), a) for a in assertions)
    return named, tuple((unique(j.id), j) for j in judges)


class JudgeSets(Mapping[str, list[str]]):
    """Each case's judge ids, in the eval's case order: the distinct lists, and per case two
    bytes naming its list (cases share a few: most have the eval's own judges). A dict of
    100,000 cases held ~38 bytes a case from before grading to the end of `mst run` (issue 16,
    bench/perf16_memory.md); looked up by case id only on resume, which builds its index then."""

    __slots__ = ("_codes", "_ids", "_index", "_lists")

    def __init__(self, ids: Sequence[str], codes: Sequence[int], lists: Sequence[list[str]]) -> None:
        self._ids, self._codes, self._lists = ids, codes, lists
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __getitem__(self, case_id: str) -> list[str]:
        if self._index is None:
            self._index = {c: i for i, c in enumerate(self._ids)}
        return self._lists[self._codes[self._index[case_id]]]

    def items(self) -> ItemsView[str, list[str]]:
        return _JudgeItems(self)

    def pairs(self) -> Iterator[tuple[str, list[str]]]:
        """(case id, its judge ids) in case order, with no look-up by id."""
        return zip(self._ids, map(self._lists.__getitem__, self._codes), strict=True)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping) or len(other) != len(self):
            return False
        missing = object()
        return all(other.get(case, missing) == names for case, names in self.pairs())

    __hash__ = None  # type: ignore[assignment]  # a mapping: unhashable, as a dict is


class _JudgeItems(ItemsView[str, list[str]]):
    """``JudgeSets.items()``, iterated without a look-up per case."""

    _mapping: JudgeSets

    def __iter__(self) -> Iterator[tuple[str, list[str]]]:
        return self._mapping.pairs()


def judge_sets(resolved: ResolvedEval) -> JudgeSets:
    """Each case's judge ids, sorted: what run.json's ``grading.judges`` records and resume
    compares. Cases that share their judges (resolution gives them one tuple) share one list."""
    return _EVAL_JUDGES.of(resolved)[0]


def eval_judges(resolved: ResolvedEval) -> tuple[ResolvedJudge, ...]:
    """Every distinct judge of the eval (by identity: the last case's of each), the pairwise
    judge last: :func:`mst.grading.preflight.judges_of`."""
    return _EVAL_JUDGES.of(resolved)[1]


def _judges_pass(resolved: ResolvedEval) -> tuple[JudgeSets, tuple[ResolvedJudge, ...]]:
    """:func:`judge_sets` and :func:`eval_judges` from one reading of the cases."""
    lists: dict[int, tuple[tuple[ResolvedJudge, ...], int]] = {}
    distinct: list[list[str]] = []
    codes = array("H")
    ids: list[str] = []  # read in this loop: each read of resolved.cases makes its cases afresh
    found: dict[str, ResolvedJudge] = {}
    last: tuple[ResolvedJudge, ...] | None = None
    for c in resolved.cases:
        ids.append(c.id)
        judges = c.judges
        if judges is not last:  # the previous case's tuple adds no judge (most cases share one)
            last = judges
            for j in judges:
                found[j.identity] = j
        held = lists.get(id(judges))
        if held is None or held[0] is not judges:
            if len(distinct) == 1 << 16:  # more distinct sets than two bytes name: four
                codes = array("I", codes)
            held = lists[id(judges)] = (judges, len(distinct))
            distinct.append(sorted(j.id for j in judges))
        codes.append(held[1])
    if resolved.pairwise is not None:
        found.setdefault(resolved.pairwise.identity, resolved.pairwise)
    return JudgeSets(ids, codes, distinct), tuple(found.values())


class _EvalJudges:
    """The judges of the eval read last. `mst run` asks for them four times (the preflight, the
    keys a grading needs, the grading context, the grading's pool), and each reading of a
    resolved eval's cases makes every case afresh (config/resolved.py ``CaseTable``): a few
    thousand instructions a case each time (bench/perf16_gcompute.md, session 11). A resolved
    eval is immutable, so its cases are read for them once; it is held weakly (a new eval reads
    its own, and a finished run's cases are not kept alive by this)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: tuple[weakref.ref[ResolvedEval], tuple[JudgeSets, tuple[ResolvedJudge, ...]]] | None = None

    def of(self, resolved: ResolvedEval) -> tuple[JudgeSets, tuple[ResolvedJudge, ...]]:
        held = self.held
        if held is None or held[0]() is not resolved:
            held = self.held = (weakref.ref(resolved), _judges_pass(resolved))
        return held[1]


_EVAL_JUDGES: Final = _EvalJudges()


def grader_ids(graders: GradersConfig | None) -> list[str]:
    """The enabled deterministic graders' ids, sorted (run.json's ``grading.graders``)."""
    return sorted(graders.enabled_ids) if graders is not None else []


@dataclass
class GradingContext:
    """One run's grading settings, computed once. ``GradingContext()`` grades with no
    deterministic graders and no redaction (a single trial graded by hand, a test)."""

    graders: GradersConfig | None = None
    redactor: Redactor = NO_REDACTION
    judges: Mapping[str, list[str]] = field(default_factory=dict)
    access: JudgeAccess = field(default_factory=JudgeAccess)  # judges' caps, holds and credentials
    manifest: dict[str, Any] | None = field(init=False, default=None)
    manifest_json: bytes = field(init=False, default=b"")
    # Names and identities per distinct (assertions, judges) pair, which resolution shares
    # between cases (most cases have only the eval's own): a run of 100,000 cases keeps a few,
    # not a digest per assertion and case. The tuples are kept too, so their ids stay theirs.
    _named: dict[tuple[int, int], tuple[tuple[Any, ...], tuple[Any, ...], _Named]] = field(
        init=False, default_factory=dict)
    _last: tuple[ResolvedCase, CasePlan] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.graders is not None and not self.graders.enabled_ids:
            self.graders = None
        if self.graders is not None:
            from mst.graders import build_manifest

            self.manifest = build_manifest(self.graders)
            self.manifest_json = orjson.dumps(self.manifest)

    @classmethod
    def of(cls, resolved: ResolvedEval, redactor: Redactor = NO_REDACTION,
           access: JudgeAccess | None = None) -> GradingContext:
        return cls(resolved.graders, redactor, judge_sets(resolved), access or JudgeAccess())

    @property
    def grader_ids(self) -> list[str]:
        return grader_ids(self.graders)

    def plan(self, case: ResolvedCase) -> CasePlan:
        """The case's plan: its view, made when asked (the last one is kept: a trial asks a few
        times), with the names shared by every case of the same assertions and judges."""
        last = self._last
        if last is not None and last[0] is case:
            return last[1]
        key = (id(case.assertions), id(case.judges))
        held = self._named.get(key)
        if held is None or held[0] is not case.assertions or held[1] is not case.judges:
            held = self._named[key] = (case.assertions, case.judges, _named(case.assertions, case.judges))
        plan = CasePlan(case, *held[2])
        self._last = (case, plan)
        return plan

    def session(self, trial: TrialView) -> Sequence[Event]:
        """The trial's session as graders read it: redacted of the run's secrets. May raise
        :class:`~mst.session.io.TranscriptError` when the trial has no readable transcript."""
        events = trial.events
        return [self.redactor.value(e) for e in events] if self.redactor.active else events


__all__ = ["CasePlan", "GradingContext", "JudgeSets", "eval_judges", "grader_ids", "judge_sets"]
