"""The typed records grading produces: a trial's grading and a case's pairwise comparison.

Frozen, slotted dataclasses inside; one codec each (``to_json`` / ``from_json``) at the edge,
the way :mod:`mst.endings` keeps its closed set. ``to_json`` writes exactly the bytes a run's
``grading.jsonl``, ``results.json`` and ``comparisons.json`` hold (docs/grading.md), so the
files keep their format; ``from_json`` is the one place a stored record is decoded.

* trial: ``{variant, case, trial, status, passed, verdicts, errors[, graders, gradersPath, try]}``;
  ``gradersPath`` names the run's grader manifest the ``graders`` entries refer to (in runs an
  older mst wrote, the trial's own grader file or folder)
* comparison: ``{kind: "pairwise", case, candidate, baseline, judge, identity, pairs, wins,
  ties, losses, preference, errors[, tries]}``

``try`` (a trial's) and ``tries`` (a comparison's, per compared trial the candidate's and the
baseline's) name the attempts graded: an attempt collected again since (its transcript was lost,
docs/run-directory.md) is graded again, not kept. Records written before they existed have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import orjson

Side = Literal["candidate", "baseline", "tie"]
Status = Literal["graded", "ungraded"]


_new = tuple.__new__
MEASURED = frozenset({"pass", "fail"})  # grader statuses that carry a value


class RecordError(ValueError):
    """A stored grading record that does not decode; names what is wrong."""


def _need(data: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return data[key]
    except (KeyError, TypeError):
        raise RecordError(f"a {what} record needs {key!r}") from None


# ---------------------------------------------------------------------------------------------
# A trial's grading


CALL_FIELDS = ("model", "inputTokens", "outputTokens", "latencyMs", "costUsd", "votes")


class VerdictRecord(NamedTuple):
    """One assertion's or judge's verdict on a trial. A named tuple (immutable, slotted, typed),
    as the session lookups' records are: a run decodes several per trial, and a tuple is several
    times cheaper to build than a frozen dataclass."""

    judge: str  # the unique name within the case (``contains#2``)
    kind: str  # "assertion" | "code" | "llm" | "agentic"
    identity: str | None
    passed: bool
    score: float | None = None
    reason: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None
    # A model judge's calls, written at the verdict's top level: model, inputTokens, outputTokens,
    # latencyMs, costUsd (null without a price) and votes (docs/grading.md, "What a verdict records").
    calls: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "kind": self.kind, "identity": self.identity,
                               "passed": self.passed, "score": self.score, "reason": self.reason}
        if self.usage:
            out["usage"] = dict(self.usage)
        if self.duration_ms is not None:
            out["durationMs"] = self.duration_ms
        if self.calls:
            out.update(self.calls)
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
        calls = {k: data[k] for k in CALL_FIELDS if k in data} if "inputTokens" in data else None
        return _new(cls, (judge, get("kind", "code"), get("identity"), passed, get("score"), get("reason"),
                          get("usage") or None, get("durationMs"), calls))


@dataclass(frozen=True, slots=True)
class GradingError:
    """A grader (assertion, judge, deterministic grader) that gave no verdict: the trial is ungraded."""

    judge: str
    kind: str  # "assertion" | "code" | "llm" | "agentic" | "grader"
    identity: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "kind": self.kind, "identity": self.identity, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradingError:
        return cls(str(_need(data, "judge", "grading error")), str(data.get("kind", "code")), data.get("identity"),
                   str(data.get("message", "")))


class GraderValue(NamedTuple):
    """One deterministic grader's result on a trial, as the trial's record lists it: its value,
    status and message, and in ``detail`` anything else the run's grader manifest does not imply
    (``{"diagnostics": [...]}``, or ``{"result": {...}}``, the whole result, when the manifest
    would not rebuild it: :func:`mst.graders.results.record_entry`). A named tuple, as
    :class:`VerdictRecord`: ten of them are decoded per trial."""

    id: str
    value: float | None
    status: str  # "pass" | "fail" | "unavailable" | "error"
    message: str = ""  # stored only when not empty
    detail: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return _grader_entry(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraderValue:
        try:
            return _grader_value(data)
        except (KeyError, TypeError, AttributeError):
            raise RecordError("a grader value needs 'id' and 'status'") from None

    @property
    def measured(self) -> bool:
        """A value to aggregate: ``unavailable`` and ``error`` are missing evidence, never zero."""
        return self.status in MEASURED


def _grader_entry(g: GraderValue) -> dict[str, Any]:
    """``{id, value, status[, message][, diagnostics | result]}``, as a record stores it."""
    entry: dict[str, Any] = {"id": g[0], "value": g[1], "status": g[2]}
    if g[3]:
        entry["message"] = g[3]
    if g[4]:
        entry.update(g[4])
    return entry


def _grader_entries(graders: Iterable[GraderValue]) -> list[dict[str, Any]]:
    """:func:`_grader_entry` of each of a trial's grader values."""
    return [_grader_entry(g) for g in graders]


def _journal_entries(graders: Iterable[GraderValue]) -> list[Any]:
    """:func:`_grader_entries` for the journal's one encoding: a value object seen before is
    its entry's JSON (an ``orjson.Fragment``, encoded at its second sight), any other its
    dict. The defaults share most values between trials (one object each,
    :func:`mst.graders.results.grader_entries`), so those are encoded once, not made into a
    dict and encoded per trial (bench/perf16_gcompute.md, session 13 round 2)."""
    seen = _SEEN
    entries: list[Any] = []
    for g in graders:
        held = seen.get(id(g))
        if held is not None and held[0] is g:  # the value is held with its entry: no address reuse
            if held[1] is None:
                held = seen[id(g)] = (g, orjson.Fragment(orjson.dumps(_grader_entry(g))))
            entries.append(held[1])
        else:
            if len(seen) >= _SEEN_MAX:  # values made per trial would otherwise fill it
                seen.clear()
            seen[id(g)] = (g, None)
            entries.append(_grader_entry(g))
    return entries


_SEEN: dict[int, tuple[GraderValue, orjson.Fragment | None]] = {}  # id(value) -> (value, its entry's JSON)
_SEEN_MAX = 256  # grading threads share it: each step is one dict operation, a lost race encodes again


def _grader_value(data: Mapping[str, Any]) -> GraderValue:
    """An entry as stored; anything but its id, value, status and message becomes ``detail``.
    Records older than the message have three fields, today's usually four: read inline."""
    n, message = len(data), data.get("message", "")
    if n == 3 or (n == 4 and "message" in data):
        return _new(GraderValue, (data["id"], data.get("value"), data["status"], message, None))
    detail = {k: v for k, v in data.items() if k not in _ENTRY_KEYS} or None
    return _new(GraderValue, (data["id"], data.get("value"), data["status"], message, detail))


_ENTRY_KEYS = frozenset({"id", "value", "status", "message"})


@dataclass(frozen=True, slots=True)
class TrialGrading:
    """The grading of one trial: its verdicts and errors decide its status."""

    variant: str
    case: str
    trial: int
    verdicts: tuple[VerdictRecord, ...] = ()
    errors: tuple[GradingError, ...] = ()
    graders: tuple[GraderValue, ...] | None = None  # None: no grader ran (none enabled, or no session)
    graders_path: str | None = None  # the grader manifest the entries of ``graders`` refer to
    try_number: int | None = None  # the attempt's try graded; None in records older than the field
    # The judges' own event streams made by this grading, (judge name, JSONL): written beside the
    # run (docs/run-directory.md, judges/), never in a record.
    streams: tuple[tuple[str, bytes], ...] = field(default=(), compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.variant, self.case, self.trial)

    @property
    def status(self) -> Status:
        return "ungraded" if self.errors else "graded"

    @property
    def passed(self) -> bool | None:
        """All verdicts passed; ``None`` while ungraded (it is then neither passed nor failed)."""
        return trial_passed(bool(self.errors), self.verdicts)

    def verdict(self, name: str) -> VerdictRecord | None:
        return next((v for v in self.verdicts if v.judge == name), None)

    def to_json(self) -> dict[str, Any]:
        return self._json(_grader_entries)

    def journal_json(self) -> dict[str, Any]:
        """:meth:`to_json` for a dict that is only encoded (the grading journal's line): the
        grader entries of values seen before are their JSON already (``orjson.Fragment``), the
        same bytes. Nothing may read or redact them: a redacted record is made from :meth:`to_json`."""
        return self._json(_journal_entries)

    def _json(self, entries: Callable[[Iterable[GraderValue]], Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "variant": self.variant, "case": self.case, "trial": self.trial, "status": self.status,
            "passed": self.passed, "verdicts": [v.to_json() for v in self.verdicts],
            "errors": [e.to_json() for e in self.errors],
        }
        if self.graders is not None:
            out["graders"] = entries(self.graders)
        if self.graders_path is not None:
            out["gradersPath"] = self.graders_path
        if self.try_number is not None:
            out["try"] = self.try_number
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialGrading:
        # A run decodes one per trial to summarize it: the common shapes are read inline.
        try:
            variant, case, trial = data["variant"], data["case"], data["trial"]
            if variant.__class__ is not str or case.__class__ is not str or trial.__class__ is not int:
                raise RecordError("a trial grading's variant and case must be strings, its trial an integer")
            verdicts, errors, graders = data.get("verdicts"), data.get("errors"), data.get("graders")
            verdict = VerdictRecord.from_json
            return cls(
                variant, case, trial,
                tuple([verdict(v) for v in verdicts]) if verdicts else (),
                tuple([GradingError.from_json(e) for e in errors]) if errors else (),
                None if graders is None else tuple([_grader_value(g) for g in graders]),
                data.get("gradersPath"), _optional_int(data.get("try")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RecordError(f"a trial grading record is malformed: {exc!r}") from None


# ---------------------------------------------------------------------------------------------
# A case's pairwise comparison


SIDES = ("candidate", "baseline", "tie")
_SIDE: dict[Any, Side] = {"candidate": "candidate", "baseline": "baseline", "tie": "tie"}


class PairRecord(NamedTuple):
    """Trial i of the candidate against trial i of the baseline, judged in both orders. A named
    tuple, as :class:`VerdictRecord`: a summary decodes every pair of every case's comparison."""

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
        try:  # the shape every pair mst writes has, read inline; anything else is checked below
            trial, ab, ba, preference = data["trial"], data["ab"], data["ba"], data["preference"]
            # Each side as the one shared string (a summary holds every pair's sides at once),
            # not the decoded copy; None for any other value (TypeError: an unhashable one).
            ab, ba, preference = _SIDE.get(ab), _SIDE.get(ba), _SIDE.get(preference)
        except (KeyError, TypeError):
            return cls._checked(data)
        if trial.__class__ is not int or ab is None or ba is None or preference is None:
            return cls._checked(data)
        usage = data.get("usage")
        return _new(cls, (trial, ab, ba, preference, data.get("reasons"), tuple(usage) if usage else (),
                          data.get("durationMs")))

    @classmethod
    def _checked(cls, data: Mapping[str, Any]) -> PairRecord:
        """A pair of any other shape: the error names what is wrong (a string trial is taken)."""
        sides = [_need(data, k, "pair") for k in ("ab", "ba", "preference")]
        if any(s not in SIDES for s in sides):
            raise RecordError(f"a pair's sides must be candidate, baseline or tie, got {sides}")
        ab, ba, preference = sides  # checked above: each is a Side
        return cls(int(_need(data, "trial", "pair")), ab, ba, preference, data.get("reasons"),
                   tuple(data.get("usage") or ()), data.get("durationMs"))


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
    # Per compared trial (its index as a string, as JSON keys are), the candidate's and the
    # baseline's try; None in records older than the field.
    tries: Mapping[str, tuple[int, int]] | None = None
    # The pairwise judge's event streams, (``<trial>.ab`` / ``<trial>.ba``, JSONL): files, never the record.
    streams: tuple[tuple[str, bytes], ...] = field(default=(), compare=False, repr=False)

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
        return _preference(bool(self.pairs), self.wins, self.losses)

    @property
    def complete(self) -> bool:
        return not self.errors

    def with_tries(self, tries: Mapping[str, tuple[int, int]]) -> CaseComparison:
        """This comparison, of the attempts ``tries`` names."""
        return CaseComparison(self.case, self.candidate, self.baseline, self.judge, self.identity, self.pairs,
                              self.errors, dict(tries), self.streams)

    def to_json(self) -> dict[str, Any]:
        wins, ties, losses = self.wins, self.ties, self.losses
        out: dict[str, Any] = {
            "kind": "pairwise", "case": self.case, "candidate": self.candidate, "baseline": self.baseline,
            "judge": self.judge, "identity": self.identity, "pairs": [p.to_json() for p in self.pairs],
            "wins": wins, "ties": ties, "losses": losses,
            "preference": _preference(bool(self.pairs), wins, losses), "errors": [e.to_json() for e in self.errors],
        }
        if self.tries is not None:
            out["tries"] = {t: list(pair) for t, pair in self.tries.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseComparison:
        try:
            return cls(
                str(_need(data, "case", "comparison")), str(_need(data, "candidate", "comparison")),
                str(data.get("baseline", "")), str(data.get("judge", "")), str(data.get("identity", "")),
                tuple([PairRecord.from_json(p) for p in data.get("pairs", ())]),
                tuple([PairError.from_json(e) for e in data.get("errors", ())]),
                _tries(data.get("tries")),
            )
        except (TypeError, AttributeError) as exc:
            raise RecordError(f"a comparison record is malformed: {exc}") from None


def _preference(judged: bool, wins: int, losses: int) -> Side | None:
    """The side with more pair wins; a tie when even; ``None`` with no judged pair."""
    if not judged:
        return None
    return "candidate" if wins > losses else "baseline" if losses > wins else "tie"


def trial_passed(has_errors: bool, verdicts: Iterable[VerdictRecord]) -> bool | None:
    """A trial's pass rule, for a typed grading and for the summary reading stored JSON: every
    verdict passed, or ``None`` while any grading error leaves it ungraded."""
    return None if has_errors else all(v.passed for v in verdicts)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _tries(value: Any) -> dict[str, tuple[int, int]] | None:
    if value is None:
        return None
    try:
        return {str(t): (int(c), int(b)) for t, (c, b) in value.items()}
    except ValueError:
        raise RecordError(f"a comparison's tries must map trials to [candidate, baseline], got {value!r}") from None


def grading_from_json(data: Mapping[str, Any]) -> TrialGrading | CaseComparison:
    """A ``grading.jsonl`` line: a comparison (``kind: pairwise``) or a trial's grading."""
    if data.get("kind") == "pairwise":
        return CaseComparison.from_json(data)
    return TrialGrading.from_json(data)


__all__ = [
    "CaseComparison",
    "GraderValue",
    "GradingError",
    "PairError",
    "PairRecord",
    "RecordError",
    "Side",
    "TrialGrading",
    "VerdictRecord",
    "grading_from_json",
    "trial_passed",
]
