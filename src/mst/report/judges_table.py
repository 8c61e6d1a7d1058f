"""The terminal's judges table: each judge's pass rate with its interval per variant, and what
the judges' model calls cost (summary.json's ``judges`` and ``judgeUsage``; docs/grading.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _cost(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def _rate(figures: Mapping[str, Any]) -> str:
    low, high = (figures.get("interval") or [None, None])[:2]
    rate = _pct(figures.get("passRate"))
    return rate if low is None or high is None else f"{rate} [{_pct(low)}, {_pct(high)}]"


def judges_table(summary: Mapping[str, Any]) -> Table | None:
    """One row per (variant, judge), then one per variant's judge usage; None without judges."""
    rows = [(v["id"], name, figures) for v in summary["variants"] for name, figures in (v.get("judges") or {}).items()]
    if not rows:
        return None
    level = f"{summary.get('confidence', 0.95):.0%}"
    table = Table(title=f"judges: pass rate per trial ({level} interval), tokens and cost")
    for col in ("variant", "judge", "pass rate", "graded", "tokens in/out", "cost"):
        table.add_column(col, justify="left" if col in ("variant", "judge") else "right")
    for variant, name, f in rows:
        table.add_row(variant, name, _rate(f), str(f["graded"]), f"{f['inputTokens']}/{f['outputTokens']}",
                      _cost(f.get("costUsd")))
    for v in summary["variants"]:
        u = v.get("judgeUsage")
        if u and (u["inputTokens"] or u["outputTokens"]):
            table.add_row(v["id"], "all judge calls", "", "", f"{u['inputTokens']}/{u['outputTokens']}",
                          _cost(u.get("costUsd")))
    total = summary.get("judgeUsage")
    if total and (total["inputTokens"] or total["outputTokens"]):
        table.add_row("total", "all judge calls", "", "", f"{total['inputTokens']}/{total['outputTokens']}",
                      _cost(total.get("costUsd")))
    return table


__all__ = ["judges_table"]
