"""`mst runs list|upload` and the result-store side of `mst run` / `mst grade` (docs/result-store.md):
parse, call mst.store, print. Nothing here imports fsspec until a store is used."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mst.cli.handling import handle_errors
from mst.cli.options import PATH

if TYPE_CHECKING:
    from mst.config.models import EvalConfig

F = TypeVar("F", bound=Callable[..., Any])


def results_option(fn: F) -> F:
    """``--results URL``: the result store a finished run is uploaded to (default: the eval's results.store)."""
    return click.option("--results", "results", metavar="URL",
                        help="Upload the run to this result store: file:///dir, s3://bucket/prefix, "
                             "gs://bucket/prefix (default: the eval's results.store).")(fn)


def store_url(results: str | None, eval_path: str | Path | None, config: EvalConfig | None = None) -> str | None:
    """``--results``, else the eval file's ``results.store`` (a relative file:// URL is relative to the eval).

    ``config`` is the eval at ``eval_path`` when the caller has it already (`mst run` and `mst grade`
    have just run it): the file is then not read and validated a second time after the run
    (bench/perf16_startup.md, Session 6)."""
    if results:
        return results
    if eval_path is None:
        return None
    if config is None:
        if not Path(eval_path).is_file():
            return None
        from mst.config.load import load_eval

        config = load_eval(Path(eval_path)).config
    if config.results is None:
        return None
    from mst.store.backend import resolve_url  # only for an eval that names a store

    return resolve_url(config.results.store, Path(eval_path).parent)


def source_run(target: str, results: str | None, runs_dir: Path | None) -> tuple[Path, str | None]:
    """The local run directory `mst grade TARGET` grades, fetched first when TARGET is a stored run
    (``<store>/runs/<id>``, or an id with ``--results``); and the store it came from, if any."""
    from mst.runs.layout import resolve_run_dir
    from mst.store.backend import split_run_url

    stored = split_run_url(target)
    if stored is None and results and "/" not in target and not Path(target).exists():
        stored = (results, target)
    if stored is None and "://" in target:
        from mst.errors import Problem, UserError

        raise UserError(Problem(target, "not a stored run: expected <store URL>/runs/<run id>"))
    if stored is None:
        return resolve_run_dir(Path(target)), None
    from mst.store import fetch_run, open_store

    store_at, run_id = stored
    return fetch_run(open_store(store_at), run_id, runs_dir or Path("runs")), store_at


def publish(run_dir: Path, url: str, *, source: Path | None = None, jobs: int = 16) -> None:
    """Upload a finished run (a regrade's source first, when it is local and not stored yet, so the
    regrade refers to its transcripts instead of copying them), and say where it went."""
    from mst.errors import Problem, UserError
    from mst.store import open_store, stored_run_ids, upload_run

    try:
        store = open_store(url)
        if source is not None and source.name not in stored_run_ids(store, [source.name]):
            _said(upload_run(source, store, jobs=jobs))
        _said(upload_run(run_dir, store, jobs=jobs))
    except UserError as exc:
        hint = Problem(str(run_dir), f"the run is kept here; `mst runs upload {run_dir} --results {url}` "
                       "uploads it again")
        raise UserError([*exc.problems, hint]) from None


def _said(report: Any) -> None:
    click.secho(f"stored: {report.url} ({report.uploaded} objects uploaded, {report.skipped} already there"
                + (f", {report.referred} files referred to in the source run" if report.referred else "") + ")",
                fg="green", err=True)


@click.group("runs")
def runs() -> None:
    """Runs in a runs directory or a result store: list them, upload one."""


@runs.command("list")
@click.option("--results", metavar="URL", help="List the runs in this result store instead of a runs directory.")
@click.option("--runs-dir", type=PATH, default=Path("runs"), show_default=True,
              help="The local runs directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@handle_errors
def list_runs(results: str | None, runs_dir: Path, as_json: bool) -> None:
    """Each run: id, eval, started, phases, pass rate per variant."""
    from mst.store import local_runs, open_store, stored_runs

    heads = stored_runs(open_store(results)) if results else local_runs(runs_dir)
    if as_json:
        import orjson

        click.echo(orjson.dumps([h.model_dump(mode="json") for h in heads], option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"runs in {results or runs_dir}")
    for column in ("id", "eval", "started", "phases", "pass rate per variant"):
        table.add_column(column, overflow="fold")  # an id is never cut short: it is what you type next
    for h in heads:
        phases = " ".join(f"{k}:{v}" for k, v in h.phases.items())
        rates = "  ".join(f"{v} {_percent(r)}" for v, r in h.passRates.items())
        table.add_row(h.id + (f" (regrade of {h.regradeOf})" if h.regradeOf else ""), h.eval, h.createdAt or "",
                      phases, rates)
    Console(soft_wrap=True).print(table)


@runs.command("upload")
@click.argument("run_dir", type=PATH)
@results_option
@click.option("--jobs", type=click.IntRange(1, 256), default=16, show_default=True, help="Objects uploaded at once.")
@handle_errors
def upload(run_dir: Path, results: str | None, jobs: int) -> None:
    """Upload a run directory to a result store (again: finishes an upload that was cut short)."""
    from mst.runs.layout import resolve_run_dir
    from mst.store.manifest import run_head

    run_dir = resolve_run_dir(run_dir)
    url = store_url(results, _eval_path(run_dir))
    if url is None:
        raise click.UsageError("no result store: pass --results URL (or set results.store in the eval)")
    head = run_head(run_dir)
    source = run_dir.parent / head.regradeOf if head.regradeOf else None
    publish(run_dir, url, source=source if source is not None and (source / "run.json").is_file() else None,
            jobs=jobs)


def _eval_path(run_dir: Path) -> str | None:
    from mst.runs.record_files import read_record_file

    head = read_record_file(run_dir / "run.json", "run.json", "attempts").head
    path = (head.get("eval") or {}).get("path")
    return str(path) if path else None


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"
