"""Candidate against baseline, case by case: the ``comparison`` block of summary.json and the
figures the CI gate decides on.

A variant's per-case values are kept as :class:`Columns` — one :class:`Column` per metric, aligned
with the run's cases, NaN where a case has no value — so a 100,000-case run pays a byte a case and
metric for a metric of few distinct values (a pass rate, a count, a flag), 8 for the others, and
the same values are written into the summary's case rows, from which
:meth:`Columns.add_rows_entry` reads them back for ``mst gate`` (also across runs, ``--against``).

Only cases complete in both variants are compared (an incomplete case is neither passed nor
failed, and its means are left out too); every metric is paired by case with equal weight per
case (:func:`mst.statistics.difference_of_pairs`). See docs/statistics.md.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from mst._columns import ColumnPairs
from mst.runs.frozen import JsonView
from mst.statistics import (
    CONFIDENCE,
    MIN_CASES,
    NO_BOUNDS,
    POWER,
    Bounds,
    decide,
    difference_of_pairs,
    mean_of_cases,
    minimum_detectable_effect,
)

PASS_RATE: Final = "passRate"
_NAN: Final = float("nan")
_GROUPS: Final = (("grader:", "graders"), ("judge:", "judges"))


@dataclass(frozen=True, slots=True)
class Metric:
    """What a compared value is: its reference (``passRate``, ``grader:<id>``, ``judge:<id>``),
    which direction is better, and the range its values can take."""

    ref: str
    direction: str = "higher"
    bounds: Bounds = NO_BOUNDS


PASS_RATE_METRIC: Final = Metric(PASS_RATE, "higher", (0.0, 1.0))


_CODES: Final = 256  # distinct values a coded column holds (one byte a case); code 0 is NaN
_NEGATIVE_ZERO: Final = "-0.0"  # -0.0 == 0.0 as a dict key: its own key keeps the sign
_copysign: Final = math.copysign


class Column:
    """One metric's per-case values, NaN where a case has none: a byte a case (an index into
    the column's distinct values) while it has at most 256 of them, as most metrics of a run
    do (pass rates of few trials, counts, flags, the graders' fixed values); a float array once
    it has more. Reads back the very floats appended (-0.0 keeps its sign; NaN is the one NaN).
    Ten default graders and a pass rate in two variants held ~180 bytes a case as float arrays
    at the summary's peak (issue 16, bench/perf16_memory.md)."""

    __slots__ = ("_code_of", "_codes", "_floats", "_palette")

    def __init__(self, missing: int = 0) -> None:
        """A column whose first ``missing`` cases have no value."""
        self._codes: array[int] | None = array("B", bytes(missing))
        self._floats: array[float] = array("d")  # used once the codes would not do
        self._palette: list[float] = [_NAN]
        self._code_of: dict[object, int] = {}

    def append(self, value: float) -> None:
        codes = self._codes
        if codes is None:
            self._floats.append(value)
            return
        # A nonzero value is its own key; a zero's keeps its sign. NaN is never a key: it
        # misses, and only then is it told apart (the common case, a value seen, tests nothing).
        key: object = value if value or _copysign(1.0, value) > 0 else _NEGATIVE_ZERO
        code = self._code_of.get(key)
        if code is None:
            if value != value:  # NaN
                codes.append(0)
                return
            if len(self._palette) == _CODES:
                self._uncode()
                self._floats.append(value)
                return
            code = self._code_of[key] = len(self._palette)
            self._palette.append(value)
        codes.append(code)

    def _uncode(self) -> None:
        """Too many distinct values for a byte: the floats from here on."""
        assert self._codes is not None
        self._floats = array("d", map(self._palette.__getitem__, self._codes))
        self._codes, self._palette, self._code_of = None, [_NAN], {}

    def __len__(self) -> int:
        return len(self._codes) if self._codes is not None else len(self._floats)

    def __getitem__(self, index: int) -> float:
        codes = self._codes
        return self._palette[codes[index]] if codes is not None else self._floats[index]

    def __iter__(self) -> Iterator[float]:
        codes = self._codes
        return map(self._palette.__getitem__, codes) if codes is not None else iter(self._floats)


@dataclass(slots=True)
class Columns:
    """One variant's per-case values, aligned with ``case_ids``; NaN where a case has no value.

    The ``passRate`` column is NaN exactly for the cases that are incomplete: they are left out
    of every comparison. :meth:`over` makes columns for ids known up front (the eval's), held
    and shared by every variant rather than copied into each (issue 16's memory per case).
    """

    case_ids: Sequence[str] = field(default_factory=list)
    values: dict[str, Column] = field(default_factory=dict)
    _rows: list[tuple[str, str, Column]] | None = field(default=None, repr=False, compare=False)
    _added: int = field(default=0, repr=False, compare=False)  # the cases whose values are in
    _known: bool = field(default=False, repr=False, compare=False)  # made over() ids: not to be added to

    @classmethod
    def over(cls, case_ids: Sequence[str]) -> Columns:
        """Columns for ``case_ids`` (held, not copied, never changed), their values added in
        that order by :meth:`add_values`."""
        return cls(case_ids, _known=True)

    def add_case(self, case_id: str, values: Mapping[str, float | None]) -> None:
        """Add a case of its own (columns not made :meth:`over` known ids)."""
        ids = self.case_ids
        if self._known or not isinstance(ids, list):
            raise ValueError("add_case on columns over known ids: add_values adds their values")
        ids.append(case_id)
        self.add_values(values)

    def add_values(self, values: Mapping[str, float | None]) -> None:
        """The next case's values, by metric; NaN in every column it has no value for."""
        index = self._added
        self._added = index + 1
        columns = self.values
        for ref, value in values.items():
            column = columns.get(ref)
            if column is None:
                column = columns[ref] = Column(index)
                self._rows = None
            # Column.append's common cases inline (a call per column and case saved): no value,
            # code 0; a float seen before, its code (keyed as append keys it). Anything else
            # (a new value, NaN, an int, a float column) takes append.
            codes = column._codes
            if codes is not None:
                if value is None:
                    codes.append(0)
                    continue
                if value.__class__ is float:
                    code = column._code_of.get(value if value or _copysign(1.0, value) > 0 else _NEGATIVE_ZERO)
                    if code is not None:
                        codes.append(code)
                        continue
            column.append(_NAN if value is None else value if value.__class__ is float else float(value))
        if len(values) != len(columns):  # a column got no value: NaN in it (each ref is one column)
            for column in columns.values():
                if len(column) == index:
                    column.append(_NAN)

    def value(self, ref: str, index: int) -> float | None:
        column = self.values.get(ref)
        v = column[index] if column is not None else _NAN
        return None if math.isnan(v) else v

    def complete(self, index: int) -> bool:
        return self.value(PASS_RATE, index) is not None

    def means(self, ref: str) -> list[float]:
        """The case values of ``ref`` over complete cases: what a mean is taken over."""
        rates, column = self.values.get(PASS_RATE), self.values.get(ref)
        if rates is None or column is None:
            return []
        isnan = math.isnan
        return [v for rate, v in zip(rates, column, strict=True) if not (isnan(rate) or isnan(v))]

    def incomplete(self) -> int:
        """How many cases are incomplete (no pass rate)."""
        rates = self.values.get(PASS_RATE)
        return self._added if rates is None else sum(1 for rate in rates if math.isnan(rate))

    def row_values(self, index: int) -> dict[str, dict[str, float]]:
        """The case row's ``graders`` / ``judges`` maps (id → the case's mean), when present."""
        out: dict[str, dict[str, float]] = {}
        if self._rows is None:
            self._rows = self._row_columns()
        for key, metric_id, column in self._rows:
            codes = column._codes  # Column.__getitem__ inlined: a call per column and case saved
            v = column._palette[codes[index]] if codes is not None else column._floats[index]
            if v == v:  # not NaN
                held = out.get(key)
                if held is None:
                    out[key] = {metric_id: v}
                else:
                    held[metric_id] = v
        return out

    def _row_columns(self) -> list[tuple[str, str, Column]]:
        """(row key, metric id, column) of the grader and judge columns, in column order: made
        once (until a column is added), not a prefix test per column and case."""
        return [(key, ref[len(prefix):], column) for ref, column in self.values.items()
                for prefix, key in _GROUPS if ref.startswith(prefix)]

    def add_rows_entry(self, row: Mapping[str, Any], variant: str) -> None:
        """Add a summary.json case row's entry for ``variant`` (as :meth:`row_values` wrote it)."""
        entry = (row.get("variants") or {}).get(variant)
        if not isinstance(entry, Mapping):
            self.add_case(str(row["id"]), {})
            return
        complete = entry.get("status") != "incomplete"
        values: dict[str, float | None] = {PASS_RATE: entry.get("passRate") if complete else None}
        for prefix, key in _GROUPS:
            for metric_id, v in (entry.get(key) or {}).items():
                values[prefix + metric_id] = v
        self.add_case(str(row["id"]), values)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class MetricComparison(JsonView):
    """One metric of a candidate against the baseline, over the paired cases: both sides' means
    (equal weight per case), their difference (candidate − baseline) with its interval, two-sided
    p-value and standard error, the cases it rests on, the decision with its reason, and the
    minimum detectable effect. Reads as its JSON object too (``row["p"]``)."""

    direction: str
    bounds: Bounds
    candidate: float | None
    baseline: float | None
    difference: float | None
    low: float | None
    high: float | None
    p: float | None
    se: float | None
    cases: int
    decision: str
    reason: str | None
    mde: float | None

    def to_json(self) -> dict[str, Any]:
        return {"direction": self.direction, "range": list(self.bounds), "candidate": self.candidate,
                "baseline": self.baseline, "difference": self.difference, "low": self.low, "high": self.high,
                "p": self.p, "se": self.se, "cases": self.cases, "decision": self.decision, "reason": self.reason,
                "mde": self.mde}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricComparison:
        low, high = data.get("range") or (None, None)
        return cls(str(data["direction"]), (_float(low), _float(high)), _float(data["candidate"]),
                   _float(data["baseline"]), _float(data["difference"]), _float(data["low"]),
                   _float(data["high"]), _float(data["p"]), _float(data["se"]), int(data["cases"]),
                   str(data["decision"]), data.get("reason"), _float(data.get("mde")))


@dataclass(frozen=True, slots=True)
class Comparison(JsonView):
    """summary.json's ``variants[].comparison``: a candidate against the baseline, paired by case,
    per metric (``passRate``, ``grader:<id>``, ``judge:<id>``), with how many cases it rests on and
    how many it left out (incomplete in either variant; the baseline's lacking)."""

    confidence: float
    min_cases: int
    power: float
    cases: int
    excluded_incomplete: int
    excluded_unpaired: int
    metrics: Mapping[str, MetricComparison]
    weighting: str = "case"

    def to_json(self) -> dict[str, Any]:
        return {"weighting": self.weighting, "confidence": self.confidence, "minCases": self.min_cases,
                "power": self.power, "cases": self.cases,
                "excluded": {"incomplete": self.excluded_incomplete, "unpaired": self.excluded_unpaired},
                "metrics": {ref: row.to_json() for ref, row in self.metrics.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        excluded = data.get("excluded") or {}
        metrics = MappingProxyType({str(ref): MetricComparison.from_json(row)
                                    for ref, row in (data.get("metrics") or {}).items()})
        return cls(float(data["confidence"]), int(data["minCases"]), float(data["power"]), int(data["cases"]),
                   int(excluded.get("incomplete", 0)), int(excluded.get("unpaired", 0)), metrics,
                   str(data.get("weighting", "case")))


def metric_mean(columns: Columns, metric: Metric, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The mean of a metric over the variant's complete cases, equal weight per case."""
    return {**mean_of_cases(columns.means(metric.ref), confidence, metric.bounds), "weighting": "case"}


class PairedValues(ColumnPairs[float, float]):
    """One metric's (candidate, baseline) values of the paired cases, as
    :func:`mst.statistics.difference_of_pairs` reads them, held in two float arrays: 16 bytes
    a case, where a list of tuples costs ~110 (issue 16: 100,000 cases in one comparison)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(array("d"), array("d"))


@dataclass(frozen=True, slots=True)
class _Pairs:
    """The cases complete in both variants, as (candidate index, baseline index) in two integer
    arrays; how many cases both have but one left incomplete; how many the candidate has that
    the baseline lacks."""

    mine: array[int]
    theirs: array[int]
    incomplete: int
    unpaired: int

    def values(self, candidate: Column | None, baseline: Column | None) -> PairedValues:
        """A metric's values over the pairs where both sides have one (NaN is no value)."""
        out = PairedValues()
        if candidate is None or baseline is None:
            return out
        isnan, add_a, add_b = math.isnan, out.first.append, out.second.append
        for i, j in zip(self.mine, self.theirs, strict=True):
            a, b = candidate[i], baseline[j]
            if not (isnan(a) or isnan(b)):
                add_a(a)
                add_b(b)
        return out


def _pairs(candidate: Columns, baseline: Columns) -> _Pairs:
    """The cases of ``candidate`` paired with the baseline's by case id (by index when both have
    the same cases in the same order, as a run's variants do)."""
    at = None if candidate.case_ids == baseline.case_ids else {c: i for i, c in enumerate(baseline.case_ids)}
    mine, theirs = array("q"), array("q")
    incomplete = unpaired = 0
    for i, case_id in enumerate(candidate.case_ids):
        j = i if at is None else at.get(case_id)
        if j is None:
            unpaired += 1
        elif candidate.complete(i) and baseline.complete(j):
            mine.append(i)
            theirs.append(j)
        else:
            incomplete += 1
    return _Pairs(mine, theirs, incomplete, unpaired)


def compare(candidate: Columns, baseline: Columns, metrics: Sequence[Metric], *,
            confidence: float = CONFIDENCE, min_cases: int = MIN_CASES, power: float = POWER) -> Comparison:
    """Every metric of ``candidate`` against ``baseline``, paired by case.

    Per metric: both sides' means over the paired cases (equal weight per case), their
    difference (candidate − baseline) with interval and two-sided p-value, the cases it rests
    on, the decision (:func:`mst.statistics.decide`) and the minimum detectable effect at
    ``power`` for this many cases and the observed spread. A grader or judge metric with no
    paired value is left out; the pass rate is always there.
    """
    pairs = _pairs(candidate, baseline)
    rows: dict[str, MetricComparison] = {}
    for metric in metrics:
        values = pairs.values(candidate.values.get(metric.ref), baseline.values.get(metric.ref))
        if not values and metric.ref != PASS_RATE:
            continue
        diff = difference_of_pairs(values, confidence, metric.bounds)
        decision, reason = decide(diff, metric.direction, min_cases=min_cases, alpha=1.0 - confidence)
        rows[metric.ref] = MetricComparison(
            metric.direction, metric.bounds, diff["a"], diff["b"], diff["mean"], diff["low"], diff["high"],
            diff["p"], diff["se"], diff["cases"], decision, reason,
            minimum_detectable_effect(diff["sd"], diff["cases"], confidence, power))
    return Comparison(confidence, min_cases, power, len(pairs.mine), pairs.incomplete, pairs.unpaired,
                      MappingProxyType(rows))
