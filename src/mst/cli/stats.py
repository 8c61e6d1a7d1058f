"""``mst gate`` and ``mst plan``: parse, call the library, print (docs/statistics.md).

User errors end as every command's do (:func:`mst.cli.handling.handle_errors`); a regression
exits :data:`mst.errors.EXIT_REGRESSION`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from mst.cli.handling import F, handle_errors
from mst.cli.options import PATH, confidence_option
from mst.errors import EXIT_OK, EXIT_REGRESSION, Problem, UserError
from mst.statistics import MIN_CASES, POWER, cases_needed, minimum_detectable_effect


def run_gate(run_dir: Path, *, against: Path | None, metrics: Sequence[str], confidence: float,
             min_cases: int, summary_md: Path | None) -> bool:
    """Gate ``run_dir``, print the table, write the Markdown summary; True when it failed."""
    from mst.report.comparison import gate_markdown, gate_table
    from mst.runs.gate import gate, parse_metric, read_run
    from mst.runs.layout import resolve_run_dir

    run = read_run(resolve_run_dir(run_dir))
    base = read_run(resolve_run_dir(against)) if against is not None else None
    result = gate(run, against=base, metrics=[parse_metric(m) for m in metrics], confidence=confidence,
                  min_cases=min_cases)
    from rich.console import Console  # only when drawing: `mst graders run --json` never imports rich

    Console(stderr=True).print(gate_table(result))
    markdown = gate_markdown(result)
    targets = [summary_md] if summary_md is not None else []
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        targets.append(Path(os.environ["GITHUB_STEP_SUMMARY"]))
    for target in targets:
        try:
            with open(target, "a", encoding="utf-8") as fh:  # job summaries are appended to
                fh.write(markdown)
        except OSError as exc:
            raise UserError(Problem(str(target), f"cannot write the Markdown summary: {exc.strerror}")) from None
    return result.failed


def gate_options(fn: F) -> F:
    for option in reversed([
        click.option("--against", type=PATH,
                     help="Compare with this stored run's baseline variant instead of RUN's."),
        click.option("--metric", "metrics", multiple=True, metavar="REF[:higher|lower]",
                     help="Also gate on grader:<id> or judge:<id> (repeatable); direction from the graders."),
        click.option("--min-cases", type=click.IntRange(2), default=MIN_CASES, show_default=True,
                     help="Fewest paired cases before any decision."),
        click.option("--summary-md", type=PATH,
                     help="Append a Markdown summary here (also to $GITHUB_STEP_SUMMARY when set)."),
    ]):
        fn = option(fn)
    return fn


@click.command("gate")
@click.argument("run_dir", metavar="RUN", type=PATH)
@gate_options
@confidence_option
@handle_errors
def gate_command(run_dir: Path, against: Path | None, metrics: tuple[str, ...], min_cases: int,
                 summary_md: Path | None, confidence: float) -> None:
    """Exit 4 when a candidate is significantly worse than the baseline (Holm-adjusted)."""
    failed = run_gate(run_dir, against=against, metrics=metrics, confidence=confidence,
                      min_cases=min_cases, summary_md=summary_md)
    sys.exit(EXIT_REGRESSION if failed else EXIT_OK)


@click.command("plan")
@click.option("--difference", type=click.FloatRange(0.0, min_open=True), required=True,
              help="The true difference to detect (a pass-rate difference as a fraction: 0.05 = 5pp).")
@click.option("--sd", type=click.FloatRange(0.0), help="Standard deviation of the per-case differences.")
@click.option("--from", "from_run", type=PATH,
              help="Take the spread from this run's paired comparisons.")
@click.option("--metric", default="passRate", show_default=True, help="passRate, grader:<id> or judge:<id>.")
@click.option("--power", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=POWER,
              show_default=True)
@confidence_option
@handle_errors
def plan_command(difference: float, sd: float | None, from_run: Path | None, metric: str, power: float,
                 confidence: float) -> None:
    """How many cases a paired comparison needs to detect DIFFERENCE at the given power."""
    spreads = _spreads(sd, from_run, metric)
    for label, (spread, cases) in spreads.items():
        need = cases_needed(difference, spread, confidence, power)
        line = f"{label}: sd of per-case differences {spread:.4g} → {need} cases to detect {difference:g} " \
               f"at {power:.0%} power ({confidence:.0%} confidence)"
        mde = minimum_detectable_effect(spread, cases, confidence, power) if cases else None
        if mde is not None:
            line += f"; this run's {cases} cases detect {mde:.4g}"
        click.echo(line)


def _spreads(sd: float | None, from_run: Path | None, metric: str) -> dict[str, tuple[float, int | None]]:
    if (sd is None) == (from_run is None):
        raise UserError(Problem("mst plan", "give exactly one of --sd and --from RUN"))
    if sd is not None:
        return {"given": (sd, None)}
    from mst.runs.gate import read_run
    from mst.runs.layout import resolve_run_dir

    assert from_run is not None
    spreads = read_run(resolve_run_dir(from_run)).spreads(metric)
    if not spreads:
        raise UserError(Problem(str(from_run), f"no paired comparison of {metric} with a spread to plan from"))
    return {f"{variant} vs baseline": (spread, cases) for variant, (spread, cases) in spreads.items()}
