"""``mst graders run`` and ``mst experiments analyze``: parse, call, print.

Commands only read files and print; the computation is :func:`mst.graders.replay` and
:func:`mst.graders.analyze_experiment`, the same code the grading phase uses. A user error
(missing file, invalid config, legacy payload) is :class:`mst.errors.UserError`: one line on
stderr and exit status 2, as in every command (:mod:`mst.cli.handling`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from mst._gc import paused_gc
from mst.cli.handling import handle_errors
from mst.cli.options import PATH, confidence_option
from mst.config.yamlfile import parse_yaml
from mst.errors import EXIT_USER, UserError
from mst.graders import (
    BUILTINS,
    DEFAULT_MIN_SAMPLES,
    GradersConfigError,
    Observation,
    analyze_experiment,
    documents_of,
    parse_metric_ref,
    replay,
)
from mst.session.io import TranscriptError, read_transcript, read_transcript_lazily


def _load_document(path: Path, what: str) -> Any:
    """YAML or JSON (YAML is a superset, so one parser reads both)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc.__class__.__name__}") from None
    try:
        return parse_yaml(text.encode(), str(path))[0]  # bounded: no alias bomb, no deep nesting
    except UserError as exc:
        first = exc.problems[0]
        where = f" at line {first.line}" if first.line is not None else ""
        raise UserError(f"{what} {path} is not valid YAML or JSON{where}: {first.message}") from None


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _dump(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


# ---------------------------------------------------------------------------------------------
# mst graders run


@click.group("graders")
def graders() -> None:
    """Deterministic graders: replay them on a stored session; check operational-value scripts."""


@graders.command("run")
@click.argument("session", type=PATH)
@click.option("--config", "config_path", type=PATH, help="YAML/JSON graders config or manifest.")
@click.option("--expected", "expected_path", type=PATH, help="The case's expected value.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest and results as JSON.")
@handle_errors
def graders_run(session: Path, config_path: Path | None, expected_path: Path | None, as_json: bool) -> None:
    """Run the enabled graders on SESSION (unified-session JSONL or a JSON array of events)."""
    # The cycle collector stays paused for the whole replay (see mst._gc), and the session and
    # its lookups are freed before it resumes, so no collection ever sweeps a million events.
    with paused_gc(sys.maxsize):
        _graders_run(session, config_path, expected_path, as_json)


def _graders_run(session: Path, config_path: Path | None, expected_path: Path | None, as_json: bool) -> None:
    try:
        events = read_transcript_lazily(session)  # a million events: decoded only where read
    except TranscriptError as exc:
        raise UserError(str(exc)) from None
    except (IsADirectoryError, PermissionError) as exc:
        raise UserError(f"cannot read session {session}: {exc.__class__.__name__}") from None
    doc = _config_document(config_path) if config_path is not None else None
    expected = _load_document(expected_path, "expected file") if expected_path is not None else None
    base_dir = config_path.parent if config_path is not None else None
    try:
        run = replay(events, doc, base_dir=base_dir, expected=expected)
    except GradersConfigError as exc:
        raise UserError(f"invalid graders config: {exc}") from None
    except TranscriptError as exc:  # an event read by the lookups or a grader is not one
        raise UserError(str(exc)) from None
    if as_json:
        _dump({"manifest": run.manifest, "results": run.results})
        return
    _print_results(run.results, str(session))


def _config_document(path: Path) -> Any:
    """A config file or a run's grader manifest (``graders/manifest-<digest>.json``), or an older run's
    per-trial grader file (``.jsonl``): then the manifest its grading used."""
    if path.suffix != ".jsonl":
        return _load_document(path, "config")
    try:
        manifest, _ = documents_of(read_transcript(path))
    except TranscriptError as exc:
        raise UserError(str(exc)) from None
    if manifest is None:
        raise UserError(f"{path} holds no grader.manifest event")
    return manifest


def _threshold(result: dict[str, Any]) -> str:
    if result["threshold"] is None:
        return "—"
    sign = "≥" if result["direction"] == "higher" else "≤"
    outcome = f" {result['thresholdOutcome']}" if result["thresholdOutcome"] else ""
    return f"{sign} {_fmt(result['threshold'])}{outcome}"


def _print_results(results: list[dict[str, Any]], source: str) -> None:
    """A compact table (it fits 80 columns), then each grader's message on its own line."""
    from rich.console import Console  # only when drawing: `--json` never imports rich
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title=f"graders — {source}")
    for column in ("grader", "status", "value", "unit", "threshold"):
        table.add_column(column, no_wrap=True)
    for r in results:
        table.add_row(r["id"], r["status"], _fmt(r["value"]), r["unit"], _threshold(r))
    console.print(table)
    for r in results:
        console.print(f"[bold]{r['id']}[/bold]: {escape(r['message'])}", highlight=False, markup=True)


@graders.command("check-shell")
@click.argument("script", type=PATH)
@handle_errors
def graders_check_shell(script: Path) -> None:
    """Analyze an operational-value Bash SCRIPT: accepted (exit 0), or each rejection (exit 2)."""
    from mst.graders.custom.bash_check import analyze_shell

    try:
        source = script.read_bytes()
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise UserError(f"cannot read {script}: {exc.__class__.__name__}") from None
    analysis = analyze_shell(source)
    click.echo(f"{script}: {analysis.summary()}")
    if not analysis.accepted:
        sys.exit(EXIT_USER)


# ---------------------------------------------------------------------------------------------
# mst experiments analyze


@click.group("experiments")
def experiments() -> None:
    """Experiments over grader metrics: variants are arms, the baseline is the control."""


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path} does not exist") from None
    except orjson.JSONDecodeError:
        raise UserError(f"{path} is not valid JSON") from None


def _variants(run_json: Any, path: Path) -> tuple[list[str], str]:
    variants = run_json.get("variants") if isinstance(run_json, dict) else None
    if not isinstance(variants, list) or not variants:
        raise UserError(f"{path} lists no variants")
    ids = [v.get("id") for v in variants if isinstance(v, dict)]
    if len(ids) != len(variants) or not all(isinstance(i, str) and i for i in ids):
        raise UserError(f"{path}: every variant needs an 'id'")
    baselines = [v["id"] for v in variants if v.get("baseline") is True]
    if len(baselines) != 1:
        raise UserError(f"{path}: an experiment needs exactly one variant with baseline: true")
    return [str(i) for i in ids], baselines[0]


def _observations(run_dir: Path) -> tuple[list[Observation], dict[str, Any] | None]:
    """Each trial's grader results, from the run's grading records (and the grader manifest
    they name, or in runs an older mst wrote the trial's grader file or folder), in key order,
    and the first trial's manifest. A run whose records name no grader files has only the oldest
    folders (``.../<trial>/grader_results.json``), read as they are."""
    from mst.runs.graded import graded_trials

    observations: list[Observation] = []
    first: dict[str, Any] | None = None
    graded = (run_dir / "grading.jsonl").is_file() or (run_dir / "results.json").is_file()
    try:
        for variant, case, trial, manifest, results in graded_trials(run_dir) if graded else ():
            first = first if first is not None else manifest
            observations.append(Observation(variant, case, str(trial), results))
    except TranscriptError as exc:
        raise UserError(str(exc)) from None
    if observations:
        return observations, first
    for file in sorted((run_dir / "graders").glob("*/*/*/grader_results.json")):
        doc = _read_json(file)
        if not isinstance(doc, dict) or doc.get("schemaVersion") != 2 or not isinstance(doc.get("results"), list):
            raise UserError(f"{file} is not a schema-version-2 grader results file")
        folder = file.parent
        results = [r for r in doc["results"] if isinstance(r, dict)]
        observations.append(Observation(folder.parent.parent.name, folder.parent.name, folder.name, results))
    return observations, None


def _metric_ids(refs: Sequence[Any], present: set[str]) -> list[str]:
    ids: list[str] = []
    for ref in refs:
        gid = parse_metric_ref(ref)
        if gid is None:
            raise UserError(f"metric {ref!r} is not 'grader:<id>' or 'graders.<id>.value'")
        if gid not in present:
            raise UserError(f"metric {ref!r} names no grader with results in this run")
        ids.append(gid)
    return ids


def _default_order(ids: set[str]) -> list[str]:
    return [i for i in BUILTINS if i in ids] + sorted(ids - set(BUILTINS))


def _with_interval(value: Any, pair: Sequence[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} [{pair[0]:.3g}, {pair[1]:.3g}]" if pair else f"{value:.3g}"


def _print_analysis(analysis: dict[str, Any]) -> None:
    """One compact table per metric; intervals are 95% by default (``confidence``)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    level = f"{analysis['confidence']:.0%}"
    for metric in analysis["metrics"]:
        title = f"{metric['id']} ({metric['unit'] or 'value'}, {metric['direction']} is better)"
        table = Table(title=title, box=box.SIMPLE_HEAD)
        table.add_column("variant", no_wrap=True)
        table.add_column("n (excl., incompl.)", no_wrap=True)
        table.add_column(f"mean [{level} CI]")
        table.add_column(f"Δ vs baseline [{level} CI]")
        table.add_column("p", no_wrap=True)
        table.add_column("decision", no_wrap=True)
        for arm in metric["arms"]:
            diff = arm["difference"] or {}
            table.add_row(
                f"{arm['variant']} (baseline)" if arm["baseline"] else arm["variant"],
                f"{arm['n']} ({arm['excluded']}, {arm['excludedIncomplete']})",
                _with_interval(arm["mean"], arm["interval"]),
                _with_interval(diff.get("value"), diff.get("interval")),
                _fmt(diff.get("pValue")),
                arm["decision"],
            )
        console.print(table)
    console.print(
        f"means weigh every case equally; Δ is the mean of per-case differences over the cases both arms "
        f"have; a decision needs at least {analysis['minSamples']} paired cases and a non-zero spread. "
        "Missing, unavailable and errored results and the trials of incomplete cases are excluded, never "
        "counted as zero. Execution metrics are not evidence of task correctness."
    )


def _incomplete(run_dir: Path) -> set[tuple[str, str]]:
    """The (variant, case) pairs summary.json marks incomplete: left out of the analysis."""
    from mst.runs.record_files import read_record_file

    path = run_dir / "summary.json"
    if not path.is_file():
        return set()
    rows = read_record_file(path, "summary.json", "cases").records()
    return {(str(v), str(row["id"])) for row, _ in rows
            for v, entry in (row.get("variants") or {}).items() if entry.get("status") == "incomplete"}


def _bounds(run_dir: Path, manifest: dict[str, Any] | None) -> dict[str, tuple[float | None, float | None]]:
    """Each grader's declared (min, max), from the run's first grader manifest (``manifest``, the
    first trial's; in a run of the oldest format, its first ``grader_manifest.json``)."""
    doc: Any = manifest
    if doc is None:
        old = next(iter(sorted((run_dir / "graders").glob("*/*/*/grader_manifest.json"))), None)
        doc = _read_json(old) if old is not None else {}
    graders = doc.get("graders") if isinstance(doc, dict) else None
    return {str(g["id"]): (g.get("min"), g.get("max")) for g in graders or [] if isinstance(g, dict) and "id" in g}


@experiments.command("analyze")
@click.argument("run_dir", metavar="RUN", type=PATH)
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--min-samples", type=click.IntRange(min=1), default=DEFAULT_MIN_SAMPLES, show_default=True,
              help="Fewest paired cases (not trials) before a better/worse decision.")
@click.option("--metric", "metric_refs", multiple=True, help="grader:<id> or graders.<id>.value (repeatable).")
@confidence_option
@handle_errors
def experiments_analyze(run_dir: Path, as_json: bool, min_samples: int, metric_refs: tuple[str, ...],
                        confidence: float) -> None:
    """Compare variants of RUN on grader metrics, each against the baseline variant."""
    run_json_path = run_dir / "run.json"
    if not run_json_path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no run.json)")
    run_json = _read_json(run_json_path)
    variants, baseline = _variants(run_json, run_json_path)
    observations, manifest = _observations(run_dir)
    if not observations:
        raise UserError(f"no grader results under {run_dir / 'graders'}")
    present = {str(r.get("id")) for o in observations for r in o.results}
    refs: Sequence[Any] = metric_refs or (run_json.get("metrics") or [])
    if not isinstance(refs, list | tuple):
        raise UserError(f"{run_json_path}: 'metrics' must be a list of grader:<id> references")
    metrics = _metric_ids(refs, present) if refs else _default_order(present)
    analysis = analyze_experiment(
        observations, variants=variants, baseline=baseline, metrics=metrics, min_samples=min_samples,
        confidence=confidence, incomplete=_incomplete(run_dir), bounds=_bounds(run_dir, manifest),
    )
    if as_json:
        _dump(analysis)
    else:
        _print_analysis(analysis)
