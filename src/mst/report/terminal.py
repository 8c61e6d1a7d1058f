"""The terminal side: a rich progress bar while working, the summary table at the end.

rich is imported only where a bar or a table is drawn: `mst run --json` (a script, a CI job)
never pays for it at start-up.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from mst.runs.run import Run


class RichProgress:
    """A rich progress bar per phase, on stderr so `--json` output stays clean."""

    def __init__(self, enabled: bool = True) -> None:
        self._console: Any = None
        if enabled:
            from rich.console import Console

            self._console = Console(stderr=True)
        self._enabled = enabled and self._console.is_terminal
        self._progress: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        if self._enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=self._console, transient=False)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, phase: str, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(phase, total=total)

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def finish(self) -> None:
        self._task = None


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _interval(rate: Mapping[str, Any] | None) -> str:
    if not rate or rate.get("estimate") is None:
        return "—"
    low, high = rate.get("low"), rate.get("high")
    if low is None or high is None:
        return _pct(rate["estimate"])
    return f"{_pct(rate['estimate'])} [{_pct(low)}, {_pct(high)}]"


def print_summary(run: Run, summary: Mapping[str, Any], *, as_json: bool = False) -> None:
    if as_json:  # the file, with its per-case rows (the summary in memory has none)
        sys.stdout.flush()
        with open(run.paths.summary, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer)
        sys.stdout.flush()
        return
    from rich.console import Console

    from mst.report.comparison import comparison_table

    console = Console()
    console.print(variant_table(summary))
    paired = comparison_table(summary)
    if paired is not None:
        console.print(paired)
    from mst.report.judges_table import judges_table

    judges = judges_table(summary)
    if judges is not None:
        console.print(judges)
    for variant in summary["variants"]:
        for item in variant.get("needsFix", [])[:10]:
            console.print(f"[red]needs a fix[/red] {variant['id']}/{item['case']}/{item['trial']}: "
                          f"{item['what']}: {item['why']}")
    phases = summary.get("phases", {})
    console.print(f"run {run.id}: collect {phases.get('collect')}, grade {phases.get('grade')} → {run.paths.root}")
    totals = summary["totals"]
    if totals["incompleteCases"]:
        console.print(f"[yellow]{totals['incompleteCases']} incomplete case(s)[/yellow]: "
                      f"`mst run --resume {run.paths.root}` collects what a retry can help")


def _pairwise(pw: Mapping[str, Any]) -> str:
    """wins/ties/losses, the win rate (ties half) with its interval, and the judge's flip rate."""
    text = f"{pw['wins']}/{pw['ties']}/{pw['losses']}"
    rate = pw.get("winRate") or {}
    if rate.get("estimate") is not None:
        text += f" win {_interval(rate)}"
    flips = pw.get("flips") or {}
    if flips.get("rate") is not None:
        text += f" flips {_pct(flips['rate'])}"
    return text


def variant_table(summary: Mapping[str, Any]) -> Table:
    from rich.table import Table

    level = f"{summary.get('confidence', 0.95):.0%}"
    table = Table(title=f"{summary.get('eval', '')}: pass rates (equal weight per case, {level} interval)")
    for col in ("variant", "pass rate", "pass@k", "pass^k", "cases ✓/✗/…", "infra", "vs baseline"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for v in summary["variants"]:
        k = str(max((int(x) for x in v.get("passAtK", {}) or {"1": 0}), default=1))
        cases = v["cases"]
        pw = v.get("pairwise")
        pairwise = _pairwise(pw) if pw else ("baseline" if v.get("baseline") else "—")
        table.add_row(
            v["id"] + (" (baseline)" if v.get("baseline") else ""),
            _interval(v.get("passRate")),
            _pct((v.get("passAtK") or {}).get(k)) + f" k={k}",
            _pct((v.get("passHatK") or {}).get(k)),
            f"{cases['passed']}/{cases['failed']}/{cases['incomplete']}",
            str(v["infrastructure"]["total"]),
            pairwise,
        )
    return table
