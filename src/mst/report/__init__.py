"""Reporting a run: the terminal summary (and its progress bars), drawn from ``summary.json``,
and the HTML report with its local viewer (docs/report.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mst._lazy import lazy_exports

if TYPE_CHECKING:
    from mst.report.html import write_report
    from mst.report.serve import start_viewer
    from mst.report.terminal import RichProgress, print_summary, variant_table

_EXPORTS = {
    "RichProgress": "mst.report.terminal",
    "print_summary": "mst.report.terminal",
    "variant_table": "mst.report.terminal",
    "write_report": "mst.report.html",
    "start_viewer": "mst.report.serve",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "RichProgress",
    "print_summary",
    "start_viewer",
    "variant_table",
    "write_report",
]
