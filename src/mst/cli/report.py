"""`mst report` and `mst view`: the HTML report of a run, and all runs' reports served locally
(docs/report.md)."""

from __future__ import annotations

import sys
import time
import webbrowser
from pathlib import Path

import click

from mst.cli.handling import handle_errors
from mst.cli.options import PATH


@click.command("report")
@click.argument("run_dir", type=PATH)
@click.option("--open", "open_browser", is_flag=True, help="Open the report in the default browser.")
@handle_errors
def report_command(run_dir: Path, open_browser: bool) -> None:
    """Write RUN_DIR/report.html (a run directory, or `runs` for the newest run)."""
    from mst.report.html import write_report
    from mst.runs.layout import resolve_run_dir

    path = write_report(resolve_run_dir(run_dir)).resolve()
    click.echo(str(path))
    if open_browser:
        webbrowser.open(path.as_uri())


@click.command("view")
@click.argument("runs_dir", type=PATH, default=Path("runs"))
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--open", "open_browser", is_flag=True, help="Open the index in the default browser.")
@handle_errors
def view_command(runs_dir: Path, port: int, open_browser: bool) -> None:
    """Serve the reports of every run in RUNS_DIR (default ./runs) on 127.0.0.1, with an index."""
    from mst.report.serve import start_viewer

    viewer = start_viewer(runs_dir, port)
    click.echo(f"serving {runs_dir} at {viewer.url} (Ctrl-C stops)")
    sys.stdout.flush()
    if open_browser:
        webbrowser.open(viewer.url)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.stop()
