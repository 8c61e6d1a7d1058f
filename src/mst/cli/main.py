"""The `mst` command: parse arguments, call the library, print. Nothing else lives here.

Exit codes (stable, for CI gates) are :data:`mst.errors.EXIT_CODES`: 0 every case complete,
1 internal error, 2 user error (or a disk that cannot take the run: it is resumable once fixed),
3 completed with incomplete cases, 4 a regression (`mst gate`, `mst run --fail-on-regression`;
docs/statistics.md), 130 interrupted (resumable).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from mst import __version__
from mst.cli import codecache
from mst.cli.handling import handle_errors
from mst.cli.options import PATH, confidence_option
from mst.cli.store import publish, results_option, source_run, store_url
from mst.config.pydantic_plugins import install as _install_plugin_lookup

# The `mst` command's process only (a program that imports mst as a library keeps pydantic's
# own loader): pydantic's plugin lookup without importlib.metadata when nothing declares a
# plugin, before any of mst's models is built (mst.config.pydantic_plugins).
_install_plugin_lookup()


class _Main(click.Group):
    """The optional command groups (mst.cli.graders pulls in the graders and rich) are imported
    only when a command needs them, so `mst --version` and `mst run` do not pay for them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        _attach_optional_groups()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            _attach_optional_groups()
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mst")
def main() -> None:
    """Evaluate AI agents and clients on eval cases, with honest statistics."""
    codecache.seal()  # the command's work starts: its regular expressions are not kept (mst.cli.codecache)


@main.command()
@click.argument("eval_file", type=PATH)
@handle_errors
def validate(eval_file: Path) -> None:
    """Check an eval file: schema, datasets, client settings, judges, graders."""
    from mst.config.resolve import resolve_eval

    resolved = resolve_eval(eval_file)
    trials = sum(resolved.cases.trials) * len(resolved.variants)
    click.echo(f"ok: {eval_file}: {len(resolved.cases)} cases, {len(resolved.variants)} variants, "
               f"{trials} attempts")


@main.command()
def schema() -> None:
    """Print the JSON Schema of the eval file (for editors)."""
    import orjson

    from mst.config.models import EvalConfig

    click.echo(orjson.dumps(EvalConfig.model_json_schema(), option=orjson.OPT_INDENT_2).decode())


@main.command()
@click.argument("target", type=PATH)
@click.option("--resume", is_flag=True, help="TARGET is a run directory: finish it.")
@click.option("--no-grade", is_flag=True, help="Collect only (phases.grade = skipped).")
@click.option("--runs-dir", type=PATH, help="Where runs are written (default ./runs).")
@click.option("--concurrency", type=click.IntRange(1), help="Attempts at once (overrides the eval).")
@click.option("--secrets-file", type=PATH, help="A dotenv file of keys for clients and judges.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json instead of tables.")
@click.option("--runner", help="Run shards on this runner: process, ray, command, or a plugin.")
@click.option("--runner-option", "runner_options", multiple=True, metavar="KEY=VALUE",
              help="A runner option (repeatable): shards=N, keep=true, or the runner's own.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 4 when a candidate's pass rate is significantly worse than the baseline's (mst gate).")
@click.option("--summary-md", type=PATH,
              help="With --fail-on-regression: append the gate's Markdown summary here.")
@click.option("--otlp", is_flag=False, flag_value="", default=None, metavar="[ENDPOINT]",
              help="Then send the run as OTLP traces (default endpoint: OTEL_EXPORTER_OTLP_ENDPOINT).")
@confidence_option
@results_option
@handle_errors
def run(target: Path, resume: bool, no_grade: bool, runs_dir: Path | None, concurrency: int | None,
        secrets_file: Path | None, as_json: bool, runner: str | None, runner_options: tuple[str, ...],
        fail_on_regression: bool, summary_md: Path | None, otlp: str | None, confidence: float,
        results: str | None) -> None:
    """Collect and grade an eval (TARGET = eval file), or resume a run (--resume TARGET = run dir)."""
    with _importing():
        from mst import api as pipeline
        from mst.report.terminal import RichProgress, print_summary
        from mst.runs.layout import resolve_run_dir

    if otlp is not None:  # a missing extra or a bad endpoint is said before the run, not after it
        from mst.export.otlp import require_sdk, traces_endpoint

        require_sdk()
        traces_endpoint(otlp or None)
    with RichProgress(enabled=not as_json) as progress:
        if resume:
            outcome = pipeline.resume_run(resolve_run_dir(target), concurrency=concurrency,
                                          secrets_file=secrets_file, progress=progress, runner=runner,
                                          runner_options=runner_options, confidence=confidence)
        else:
            outcome = pipeline.run_eval(target, runs_dir=runs_dir, no_grade=no_grade, concurrency=concurrency,
                                        secrets_file=secrets_file, progress=progress, runner=runner,
                                        runner_options=runner_options, confidence=confidence)
    print_summary(outcome.run, outcome.summary, as_json=as_json)
    _print_notes(outcome.notes, outcome.notices)
    if otlp is not None:
        from mst.cli.export import export_after_run

        export_after_run(outcome.run.paths.root, otlp or None)
    if url := store_url(results, outcome.run.meta.eval.path, outcome.config):
        publish(outcome.run.paths.root, url)
    if fail_on_regression:
        from mst.cli.stats import run_gate
        from mst.errors import EXIT_REGRESSION
        from mst.statistics import MIN_CASES

        if run_gate(outcome.run.paths.root, against=None, metrics=(), confidence=confidence,
                    min_cases=MIN_CASES, summary_md=summary_md):
            sys.exit(EXIT_REGRESSION)
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("run_dir")
@click.option("--resume", is_flag=True, help="Grade only what has no verdict, in place.")
@click.option("--eval", "eval_file", type=PATH, help="Grade with this eval file.")
@click.option("--runs-dir", type=PATH, help="Where the regrade is written.")
@click.option("--secrets-file", type=PATH, help="A dotenv file of keys for judges.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json instead of tables.")
@click.option("--runner", help="Run shards on this runner: process, ray, command, or a plugin.")
@click.option("--runner-option", "runner_options", multiple=True, metavar="KEY=VALUE",
              help="A runner option (repeatable): shards=N, keep=true, or the runner's own.")
@confidence_option
@results_option
@handle_errors
def grade(run_dir: str, resume: bool, eval_file: Path | None, runs_dir: Path | None,
          secrets_file: Path | None, as_json: bool, runner: str | None, runner_options: tuple[str, ...],
          confidence: float, results: str | None) -> None:
    """Regrade a run (a directory, or <store>/runs/<id>) into a new run (regradeOf), without collecting again."""
    with _importing():
        from mst import api as pipeline
        from mst.report.terminal import RichProgress, print_summary

    source, stored_at = source_run(run_dir, results, runs_dir)
    with RichProgress(enabled=not as_json) as progress:
        outcome = pipeline.grade(source, eval_path=eval_file, resume=resume,
                                 runs_dir=runs_dir, secrets_file=secrets_file, progress=progress,
                                 runner=runner, runner_options=runner_options, confidence=confidence)
    print_summary(outcome.run, outcome.summary, as_json=as_json)
    _print_notes(outcome.notes, outcome.notices)
    if url := store_url(results or stored_at, eval_file or outcome.run.meta.eval.path, outcome.config):
        publish(outcome.run.paths.root, url, source=None if resume else source)
    sys.exit(outcome.exit_code)


@contextmanager
def _importing() -> Iterator[None]:
    """The engine imported with the cycle collector paused, its objects then frozen (``gc.freeze``).

    A command imports a few hundred modules: their classes, functions and constants are kept for
    the whole process, so collecting while they are made frees nothing, and every later
    collection would traverse them again. Frozen, no collection ever looks at them (a 1-case
    `mst run`: bench/perf16_startup.md). The collector runs as before for what the command makes.
    The code cache keeps the regular expressions these imports compile, and none the command's
    work compiles after them (``codecache.importing``): those may be made of its data, secrets too.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with codecache.importing():
            yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _print_notes(notes: list[str], notices: Sequence[str] = ()) -> None:
    for notice in notices:
        click.secho(f"note: {notice}", fg="yellow", err=True)
    for note in notes:
        click.secho(f"error: {note}", fg="red", err=True)


@main.command("collect", hidden=True)
@click.option("--bundle", required=True, help="The collect bundle's directory, or - (through the channel).")
@click.option("--results", required=True, help="Where results go, or - (through the channel).")
def collect_shard(bundle: str, results: str) -> None:
    """A collect shard's worker: speaks mst.shard/v1 on stdin/stdout."""
    from mst.runners.worker import main as run_worker

    run_worker("collect", bundle, results)


@main.command("grade-shard", hidden=True)
@click.option("--bundle", required=True, help="The grade bundle's directory, or - (through the channel).")
@click.option("--results", required=True, help="Where results go, or - (through the channel).")
def grade_shard(bundle: str, results: str) -> None:
    """A grade shard's worker: speaks mst.shard/v1 on stdin/stdout."""
    from mst.runners.worker import main as run_worker

    run_worker("grade", bundle, results)


_optional_attached = False


def _attach_optional_groups() -> None:
    global _optional_attached
    if _optional_attached:
        return
    _optional_attached = True
    from mst.cli.export import export_group
    from mst.cli.graders import experiments, graders
    from mst.cli.stats import gate_command, plan_command
    from mst.cli.store import runs

    main.add_command(export_group)
    main.add_command(graders)
    main.add_command(experiments)
    main.add_command(gate_command)
    main.add_command(plan_command)
    from mst.cli.report import report_command, view_command

    main.add_command(report_command)
    main.add_command(view_command)
    main.add_command(runs)
