"""`mst export otlp RUN`, and the export `mst run --otlp` does after a run (docs/otlp.md)."""

from __future__ import annotations

from pathlib import Path

import click

from mst.cli.handling import handle_errors
from mst.cli.options import PATH


@click.group("export")
def export_group() -> None:
    """Send a run's results to another system."""


@export_group.command("otlp")
@click.argument("run_dir", type=PATH)
@click.option("--endpoint", metavar="URL",
              help="The OTLP/HTTP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318).")
@handle_errors
def otlp_command(run_dir: Path, endpoint: str | None) -> None:
    """Send RUN as OpenTelemetry traces: one trace per attempt, over OTLP/HTTP."""
    from mst.export.otlp import export_run
    from mst.runs.layout import resolve_run_dir

    result = export_run(resolve_run_dir(run_dir), endpoint)
    click.echo(f"sent {result.attempts} attempts ({result.spans} spans) to {result.endpoint}")


def export_after_run(run_dir: Path, endpoint: str | None) -> None:
    """`mst run --otlp`: the run is finished and on disk; a failed export is a warning, never
    the run's failure (the run's exit code stands, and `mst export otlp` sends it later)."""
    from mst.errors import UserError
    from mst.export.otlp import export_run

    try:
        result = export_run(run_dir, endpoint)
    except UserError as exc:
        for problem in exc.problems:
            click.secho(f"warning: OTLP export failed: {problem}", fg="yellow", err=True)
        return
    except Exception as exc:  # whatever broke in the export, the run it was sending is done and kept
        click.secho(f"warning: OTLP export failed: {type(exc).__name__}: {exc}", fg="yellow", err=True)
        return
    click.secho(f"otlp: sent {result.attempts} attempts ({result.spans} spans) to {result.endpoint}", err=True)
