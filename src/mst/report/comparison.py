"""Candidate-vs-baseline figures as text: the terminal table of the summary's ``comparison``
blocks, and the CI gate's table and Markdown (for a CI job page such as $GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.table import Table

from mst.runs.compare import PASS_RATE
from mst.runs.gate import GateResult

_COLUMNS = ("variant", "metric", "cand / base", "Δ [CI]", "p", "cases", "MDE@80%", "decision")


def _num(value: float | None, ref: str, signed: bool = False) -> str:
    if value is None:
        return "—"
    if ref == PASS_RATE:  # percentages; a difference in percentage points
        return f"{100 * value:+.1f}pp" if signed else f"{100 * value:.1f}%"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def metric_cells(ref: str, row: Mapping[str, Any]) -> list[str]:
    """candidate / baseline, Δ [low, high], p, cases, MDE for one compared metric."""
    diff = _num(row["difference"], ref, signed=True)
    if row.get("low") is not None:
        diff += f" [{_num(row['low'], ref, True)}, {_num(row['high'], ref, True)}]"
    mde = "—" if row.get("mde") is None else _num(row["mde"], ref).lstrip("+")
    return [f"{_num(row['candidate'], ref)} / {_num(row['baseline'], ref)}", diff, _p(row["p"]),
            str(row["cases"]), mde.replace("%", "pp") if ref == PASS_RATE else mde]


def _identical(ref: str, row: Mapping[str, Any]) -> bool:
    """A metric equal in every paired case (no difference, no spread): nothing to show."""
    return ref != PASS_RATE and row["difference"] == 0 and not row["se"]


def comparison_table(summary: Mapping[str, Any]) -> Table | None:
    """Each candidate against the baseline, paired by case; None when there is nothing to compare.
    Metrics equal in every paired case are counted in the caption instead of listed."""
    rows: list[list[str]] = []
    identical = 0
    for v in summary["variants"]:
        for ref, row in ((v.get("comparison") or {}).get("metrics") or {}).items():
            if _identical(ref, row):
                identical += 1
            else:
                rows.append([v["id"], ref, *metric_cells(ref, row), row["decision"]])
    if not rows:
        return None
    level = f"{summary.get('confidence', 0.95):.0%}"
    caption = f"{identical} metric(s) equal in every paired case not shown" if identical else None
    table = Table(title=f"vs baseline, paired by case (equal weight per case, {level} interval; "
                        "incomplete cases left out)", caption=caption)
    for col in _COLUMNS:
        table.add_column(col, justify="left" if col in ("variant", "metric", "decision") else "right")
    for row in rows:
        table.add_row(*row)
    return table


def _gate_rows(result: GateResult) -> Iterator[list[str]]:
    for c in result.checks:
        verdict = "REGRESSION" if c.regression else c.decision
        yield [c.variant, c.metric, *metric_cells(c.metric, c.row), _p(c.adjusted_p), verdict]


def _gate_title(result: GateResult) -> str:
    against = f" against run {result.against}" if result.against else ""
    return (f"gate for run {result.run}{against}: {'FAILED' if result.failed else 'passed'} "
            f"(Holm-adjusted over {len(result.checks)} checks, {result.confidence:.0%} confidence)")


_GATE_COLUMNS = (*_COLUMNS[:-1], "p (Holm)", "decision")


def gate_table(result: GateResult) -> Table:
    table = Table(title=_gate_title(result))
    for col in _GATE_COLUMNS:
        table.add_column(col, justify="left" if col in ("variant", "metric", "decision") else "right")
    for row in _gate_rows(result):
        table.add_row(*row)
    return table


def gate_markdown(result: GateResult) -> str:
    """A Markdown section for a CI job page: the verdict, then one table row per check."""
    lines = [f"### mst {_gate_title(result)}", "", "| " + " | ".join(_GATE_COLUMNS) + " |",
             "|" + "---|" * len(_GATE_COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in _gate_rows(result)]
    reasons = [f"- {c.variant} {c.metric}: {c.reason}" for c in result.checks if c.reason]
    return "\n".join([*lines, "", *reasons, ""] if reasons else [*lines, ""])
