"""The typed records grading produces: a trial's grading and a case's pairwise comparison.

Frozen, slotted dataclasses inside; one codec each (``to_json`` / ``from_json``) at the edge,
the way :mod:`mst.endings` keeps its closed set. ``to_json`` writes exactly the bytes a run's
``grading.jsonl``, ``results.json`` and ``comparisons.json`` hold (docs/grading.md), so the
files keep their format; ``from_json`` is the one place a stored record is decoded.

* trial: ``{variant, case, trial, status, passed, verdicts, errors[, graders, gradersPath]}``
* comparison: ``{kind: "pairwise", case, candidate, baseline, judge, identity, pairs, wins,
  ties, losses, preference, errors}``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

if TYPE_CHECKING:
    from mst.graders.results import GraderRun
    from mst.session.events import Event

Side = Literal["candidate", "baseline", "tie"]
Status = Literal["graded", "ungraded"]


_new = tuple.__new__


class RecordError(ValueError):
    """A stored grading record that does not decode; names what is wrong."""


def _need(data: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return data[key]
    except (KeyError, TypeError):
        raise RecordError(f"a {what} record needs {key!r}") from None


# ---------------------------------------------------------------------------------------------
# A trial's grading


class VerdictRecord(NamedTuple):
    """One assertion's or judge's verdict on a trial. A named tuple (immutable, slotted, typed),
    as the session lookups' records are: a run decodes several per trial, and a tuple is several
    times cheaper to build than a frozen dataclass."""

    judge: str  # the unique name within the case (``contains#2``)
    kind: str  # "assertion" | "code"
    identity: str | None
    passed: bool
    score: float | None = None
    reason: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "kind": self.kind, "identity": self.identity,
                               "passed": self.passed, "score": self.score, "reason": self.reason}
        if self.usage:
            out["usage"] = dict(self.usage)
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerdictRecord:
        get = data.get
        passed = get("passed")
        if passed.__class__ is not bool:
            raise RecordError(f"a verdict's 'passed' must be a boolean, got {passed!r}")
        judge = get("judge")
        if judge.__class__ is not str:
            raise RecordError("a verdict record needs a 'judge' name")
        return _new(cls, (judge, get("kind", "code"), get("identity"), passed, get("score"), get("reason"),
                          get("usage") or None, get("durationMs")))


@dataclass(frozen=True, slots=True)
class GradingError:
    """A grader (assertion, judge, deterministic grader) that gave no verdict: the trial is ungraded."""

    judge: str
    kind: str  # "assertion" | "code" | "grader"
    identity: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "kind": self.kind, "identity": self.identity, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradingError:
        return cls(str(_need(data, "judge", "grading error")), str(data.get("kind", "code")), data.get("identity"),
                   str(data.get("message", "")))


class GraderValue(NamedTuple):
    """One deterministic grader's value on a trial, as the trial's record lists it (the full
    schema-v2 result is in the trial's ``grader_results.json``). A named tuple, as
    :class:`VerdictRecord`: ten of them are decoded per trial."""

    id: str
    value: float | None
    status: str  # "pass" | "fail" | "unavailable" | "error"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "value": self.value, "status": self.status}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraderValue:
        try:
            return _new(cls, (data["id"], data.get("value"), data["status"]))
        except (KeyError, TypeError):
            raise RecordError("a grader value needs 'id' and 'status'") from None

    @property
    def measured(self) -> bool:
        """A value to aggregate: ``unavailable`` and ``error`` are missing evidence, never zero."""
        return self.status in ("pass", "fail")


@dataclass(frozen=True, slots=True)
class GraderOutput:
    """What the deterministic graders of a grading just made leave for the trial's files: the
    run (manifest and results) and the (redacted) session they read. Never stored in a record."""

    run: GraderRun
    session: Sequence[Event]
    jsonl: bytes | None  # the session file's bytes, when they are the session's encoding as is


@dataclass(frozen=True, slots=True)
class TrialGrading:
    """The grading of one trial: its verdicts and errors decide its status."""

    variant: str
    case: str
    trial: int
    verdicts: tuple[VerdictRecord, ...] = ()
    errors: tuple[GradingError, ...] = ()
    graders: tuple[GraderValue, ...] | None = None  # None: no grader ran (none enabled, or no session)
    graders_path: str | None = None
    output: GraderOutput | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.variant, self.case, self.trial)

    @property
    def status(self) -> Status:
        return "ungraded" if self.errors else "graded"

    @property
    def passed(self) -> bool | None:
        """All verdicts passed; ``None`` while ungraded (it is then neither passed nor failed)."""
        if self.errors:
            return None
        return all(v.passed for v in self.verdicts)

    def with_graders_path(self, path: str) -> TrialGrading:
        """This grading, its grader files at ``path`` (relative to the run)."""
        return TrialGrading(self.variant, self.case, self.trial, self.verdicts, self.errors, self.graders, path,
                            self.output)

    def verdict(self, name: str) -> VerdictRecord | None:
        return next((v for v in self.verdicts if v.judge == name), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "variant": self.variant, "case": self.case, "trial": self.trial, "status": self.status,
            "passed": self.passed, "verdicts": [v.to_json() for v in self.verdicts],
            "errors": [e.to_json() for e in self.errors],
        }
        if self.graders is not None:
            out["graders"] = [g.to_json() for g in self.graders]
        if self.graders_path is not None:
            out["gradersPath"] = self.graders_path
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialGrading:
        try:
            graders, errors = data.get("graders"), data.get("errors")
            value = GraderValue.from_json
            return cls(
                str(_need(data, "variant", "trial grading")), str(_need(data, "case", "trial grading")),
                int(_need(data, "trial", "trial grading")),
                tuple([VerdictRecord.from_json(v) for v in data.get("verdicts", ())]),
                tuple([GradingError.from_json(e) for e in errors]) if errors else (),
                None if graders is None else tuple([value(g) for g in graders]),
                data.get("gradersPath"),
            )
        except (TypeError, AttributeError) as exc:
            raise RecordError(f"a trial grading record is malformed: {exc}") from None


# ---------------------------------------------------------------------------------------------
# A case's pairwise comparison


@dataclass(frozen=True, slots=True)
class PairRecord:
    """Trial i of the candidate against trial i of the baseline, judged in both orders."""

    trial: int
    ab: Side
    ba: Side
    preference: Side
    reasons: Mapping[str, str | None] | None = None
    usage: tuple[Mapping[str, Any], ...] = ()
    duration_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trial": self.trial, "ab": self.ab, "ba": self.ba, "preference": self.preference}
        if self.reasons is not None:
            out["reasons"] = dict(self.reasons)
        if self.usage:
            out["usage"] = [dict(u) for u in self.usage]
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairRecord:
        sides = [_need(data, k, "pair") for k in ("ab", "ba", "preference")]
        if any(s not in ("candidate", "baseline", "tie") for s in sides):
            raise RecordError(f"a pair's sides must be candidate, baseline or tie, got {sides}")
        return cls(int(_need(data, "trial", "pair")), cast(Side, sides[0]), cast(Side, sides[1]),
                   cast(Side, sides[2]), data.get("reasons"), tuple(data.get("usage") or ()), data.get("durationMs"))


@dataclass(frozen=True, slots=True)
class PairError:
    trial: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.trial, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairError:
        return cls(int(_need(data, "trial", "pair error")), str(data.get("message", "")))


@dataclass(frozen=True, slots=True)
class CaseComparison:
    """Pairwise preferences of one case, candidate vs baseline."""

    case: str
    candidate: str
    baseline: str
    judge: str
    identity: str
    pairs: tuple[PairRecord, ...] = ()
    errors: tuple[PairError, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.candidate, self.case)

    def _count(self, side: Side) -> int:
        return sum(1 for p in self.pairs if p.preference == side)

    @property
    def wins(self) -> int:
        return self._count("candidate")

    @property
    def ties(self) -> int:
        return self._count("tie")

    @property
    def losses(self) -> int:
        return self._count("baseline")

    @property
    def preference(self) -> Side | None:
        """The side with more pair wins; a tie when even; ``None`` with no judged pair."""
        if not self.pairs:
            return None
        wins, losses = self.wins, self.losses
        return "candidate" if wins > losses else "baseline" if losses > wins else "tie"

    @property
    def complete(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "pairwise", "case": self.case, "candidate": self.candidate, "baseline": self.baseline,
            "judge": self.judge, "identity": self.identity, "pairs": [p.to_json() for p in self.pairs],
            "wins": self.wins, "ties": self.ties, "losses": self.losses,
            "preference": self.preference, "errors": [e.to_json() for e in self.errors],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseComparison:
        try:
            return cls(
                str(_need(data, "case", "comparison")), str(_need(data, "candidate", "comparison")),
                str(data.get("baseline", "")), str(data.get("judge", "")), str(data.get("identity", "")),
                tuple(PairRecord.from_json(p) for p in data.get("pairs", ())),
                tuple(PairError.from_json(e) for e in data.get("errors", ())),
            )
        except (TypeError, AttributeError) as exc:
            raise RecordError(f"a comparison record is malformed: {exc}") from None


def grading_from_json(data: Mapping[str, Any]) -> TrialGrading | CaseComparison:
    """A ``grading.jsonl`` line: a comparison (``kind: pairwise``) or a trial's grading."""
    if data.get("kind") == "pairwise":
        return CaseComparison.from_json(data)
    return TrialGrading.from_json(data)


__all__ = [
    "CaseComparison",
    "GraderOutput",
    "GraderValue",
    "GradingError",
    "PairError",
    "PairRecord",
    "RecordError",
    "Side",
    "TrialGrading",
    "VerdictRecord",
    "grading_from_json",
]
