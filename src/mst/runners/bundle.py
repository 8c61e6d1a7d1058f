"""Bundles: the self-contained input of one shard, written by the coordinator, read by a worker.

The coordinator resolves (datasets, plugins, judges, client settings) once and ships the result,
so every shard works from one resolved set of settings and a worker never loads a dataset
(docs/shards.md, "The coordinator resolves; workers only execute"). A bundle is a directory:

* ``bundle.json`` — :class:`Bundle`: the resolved eval as data — the eval config, the shard's
  resolved cases (expected, metadata, assertions, judges with their identities), the resolved
  graders (their specs, custom sources included), client settings — the plugins and their
  versions, and the shard's work. A worker rebuilds the :class:`ResolvedEval` from it without
  resolving anything: it loads only the plugins' code (judge modules, client classes);
* ``code/`` — the source files of ``module:function`` judges, byte for byte (their identity is
  a digest of that file, so a worker grades with exactly the code the coordinator resolved);
* ``run/`` (grade bundles) — a run directory holding only the shard's cases: run.json, their
  transcripts and artifacts (hard links), and their earlier comparisons for ``--resume``.

Secrets are never written here: they reach a worker in the ``tokens`` message only.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from mst import __version__
from mst.config.models import Assertion, EvalConfig
from mst.config.resolved import CaseTable, ResolvedCase, ResolvedEval, ResolvedJudge
from mst.fileio import atomic_write_json, read_json
from mst.graders.config import GradersConfig, GraderSpec
from mst.grading.judges import ENTRY_POINT_GROUP
from mst.runners.protocol import PluginVersion
from mst.runs.grading_records import VerdictRecord
from mst.runs.layout import COMPARISONS_SCHEMA, RUN_SCHEMA, Key, link_attempt_files
from mst.runs.record_files import write_record_file
from mst.runs.run import Run

if TYPE_CHECKING:
    from mst.collect import AttemptSpec

BUNDLE_FILE = "bundle.json"
CODE_DIR = "code"
RUN_DIR = "run"

_ASSERTION: TypeAdapter[Any] = TypeAdapter(Assertion)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class BundleCase(_Strict):
    id: str
    prompt: str
    expected: Any = None
    metadata: dict[str, Any]
    trials: int
    assertions: list[dict[str, Any]]
    judges: list[dict[str, Any]]
    mock: dict[str, Any] | None = None


class BundleGrader(_Strict):
    """One resolved deterministic grader (:class:`~mst.graders.config.GraderSpec`), as data."""

    id: str
    kind: Literal["builtin", "custom", "operational-value"]
    enabled: bool
    name: str
    description: str
    unit: str
    direction: Literal["higher", "lower"]
    threshold: float | None = None
    min: float | None = None
    max: float | None = None
    config: dict[str, Any] = {}
    script: str | None = None
    run: str | None = None
    source_digest: str | None = None
    run_source: str | None = None


class GradeWork(_Strict):
    """What the shard grades: trials, the verdicts to keep (``--resume``), the pairs to compare."""

    trials: list[tuple[str, str, int]]
    keep: list[tuple[tuple[str, str, int], dict[str, dict[str, Any]]]]
    pairs: list[tuple[str, str]]


class Bundle(_Strict):
    kind: Literal["collect-bundle", "grade-bundle"]
    protocol: Literal["mst.shard/v1"] = "mst.shard/v1"
    mst: str
    shard: int
    shards: int
    eval_name: str
    eval_digest: str
    eval_base_dir: str
    config: dict[str, Any]
    cases: list[BundleCase]
    pairwise: dict[str, Any] | None
    client_settings: dict[str, dict[str, Any]]
    graders: list[BundleGrader] | None = None
    plugins: list[PluginVersion]
    code: list[str]
    heartbeat_seconds: float
    concurrency: int | None = None
    attempts: list[tuple[str, str, int, int]] = []  # collect: (variant, case, trial, try)
    grade: GradeWork | None = None


# ---------------------------------------------------------------------------------------------
# Writing (coordinator)


def write_collect_bundle(directory: Path, resolved: ResolvedEval, shard: int, shards: int,
                         specs: Sequence[AttemptSpec], *, heartbeat: float, concurrency: int | None) -> Bundle:
    case_ids = {s.case.id for s in specs}
    cases = [c for c in resolved.cases if c.id in case_ids]
    bundle = _bundle("collect-bundle", resolved, cases, shard, shards, heartbeat, directory)
    bundle.concurrency = concurrency
    bundle.attempts = [(s.variant.id, s.case.id, s.trial, s.try_number) for s in specs]
    bundle.plugins = [*bundle.plugins, *_client_plugins(resolved)]
    bundle.client_settings = {vid: s.model_dump(mode="json") for vid, s in resolved.client_settings.items()}
    _write(directory, bundle)
    return bundle


def write_grade_bundle(directory: Path, run: Run, resolved: ResolvedEval, shard: int, shards: int,
                       work: GradeWork, *, heartbeat: float) -> Bundle:
    case_ids = {k[1] for k in work.trials} | {case for _, case in work.pairs}
    cases = [c for c in resolved.cases if c.id in case_ids]
    bundle = _bundle("grade-bundle", resolved, cases, shard, shards, heartbeat, directory)
    bundle.grade = work
    _write_shard_run(directory / RUN_DIR, run, case_ids)
    _write(directory, bundle)
    return bundle


def _bundle(kind: Literal["collect-bundle", "grade-bundle"], resolved: ResolvedEval, cases: list[ResolvedCase],
            shard: int, shards: int, heartbeat: float, directory: Path) -> Bundle:
    judges = {j.identity: j for c in cases for j in c.judges}
    if resolved.pairwise is not None:
        judges[resolved.pairwise.identity] = resolved.pairwise
    return Bundle(
        kind=kind, mst=__version__, shard=shard, shards=shards, eval_name=resolved.config.name,
        eval_digest=resolved.digest, eval_base_dir=str(resolved.base_dir),
        config=resolved.config.model_dump(mode="json"),
        cases=[_case_json(c) for c in cases],
        pairwise=asdict(resolved.pairwise) if resolved.pairwise else None,
        client_settings={},  # collect bundles only: grading runs no client (nor imports one)
        graders=_graders_data(resolved.graders),
        plugins=_judge_plugins(judges.values()),
        code=_copy_code(judges.values(), directory / CODE_DIR),
        heartbeat_seconds=heartbeat,
    )


def _case_json(case: ResolvedCase) -> BundleCase:
    # Unset fields stay unset: an `equals` without a value compares with the case's expected.
    assertions = [a.model_dump(mode="json", exclude_unset=True) for a in case.assertions]
    return BundleCase(id=case.id, prompt=case.prompt, expected=case.expected, metadata=case.metadata,
                      trials=case.trials, assertions=assertions, judges=[asdict(j) for j in case.judges],
                      mock=case.mock)


def _graders_data(graders: GradersConfig | None) -> list[BundleGrader] | None:
    if graders is None:
        return None
    return [BundleGrader.model_validate({f.name: dict(spec.config) if f.name == "config" else getattr(spec, f.name)
                                         for f in fields(spec) if f.init}) for spec in graders.specs]


def _graders_from(data: list[BundleGrader] | None) -> GradersConfig | None:
    """The coordinator's resolved graders, as they were: never parsed (nor their files read) again."""
    if data is None:
        return None
    return GradersConfig(tuple(GraderSpec(**{**g.model_dump(), "config": MappingProxyType(g.config)})
                               for g in data))


def _judge_plugins(judges: Iterable[ResolvedJudge]) -> list[PluginVersion]:
    found = sorted({(j.target, j.version) for j in judges if j.source == "plugin"})
    return [PluginVersion(group=ENTRY_POINT_GROUP, name=target, dist=version) for target, version in found]


def _client_plugins(resolved: ResolvedEval) -> list[PluginVersion]:
    from mst.clients.registry import BUILTIN

    kinds = sorted({v.client for v in resolved.variants if v.client not in BUILTIN})
    return [PluginVersion(group="mst.clients", name=k, dist=installed_dist("mst.clients", k)) for k in kinds]


def installed_dist(group: str, name: str) -> str | None:
    """``Name==version`` of the distribution providing entry point ``group:name`` here, if any
    (importlib.metadata imported only here: bench/perf16_startup.md, Session 7)."""
    import importlib.metadata

    for ep in importlib.metadata.entry_points(group=group):
        if ep.name == name:
            dist = ep.dist
            return None if dist is None else f"{dist.metadata['Name']}=={dist.version}"
    return None


def _copy_code(judges: Iterable[ResolvedJudge], code_dir: Path) -> list[str]:
    """Copy each code judge's module file (and its packages' ``__init__``) into ``code/``."""
    copied: set[str] = set()
    for judge in judges:
        if judge.source != "code":
            continue
        module_name = judge.target.partition(":")[0]
        parts = module_name.split(".")
        for depth in range(1, len(parts) + 1):
            module = sys.modules.get(".".join(parts[:depth]))
            file = getattr(module, "__file__", None)
            if not file:
                continue
            rel = "/".join(parts[:depth]) + ("/__init__.py" if Path(file).name == "__init__.py" else ".py")
            if rel not in copied:
                (code_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, code_dir / rel)
                copied.add(rel)
    return sorted(copied)


def _write_shard_run(root: Path, run: Run, case_ids: set[str]) -> None:
    """The stored run's files for the shard's cases, as a run directory (hard links, not copies);
    its records are written as the run holds them, byte for byte."""
    keys = [k for k in sorted(run.attempts) if k[1] in case_ids]
    head = run.meta.to_json()
    meta = {"schema": RUN_SCHEMA, "id": run.id, "eval": head["eval"], "variants": head["variants"],
            "cases": [c for c in head["cases"] if c["id"] in case_ids], "phases": head["phases"]}
    for key in keys:
        record = run.attempts[key]
        link_attempt_files(run.paths.root, root, record.transcript, record.artifacts)
    write_record_file(root / "run.json", meta, "attempts", (run.attempts.raw(k) for k in keys), fsync=False)
    comparisons = (run.comparisons.raw(k) for k in sorted(run.comparisons) if k[1] in case_ids)
    write_record_file(root / "comparisons.json", {"schema": COMPARISONS_SCHEMA, "run": run.id}, "comparisons",
                      comparisons, fsync=False)


def _write(directory: Path, bundle: Bundle) -> None:
    atomic_write_json(directory / BUNDLE_FILE, bundle.model_dump(mode="json"), fsync=False)


# ---------------------------------------------------------------------------------------------
# Reading (worker)


def read_bundle(directory: Path) -> Bundle:
    return Bundle.model_validate(read_json(directory / BUNDLE_FILE, BUNDLE_FILE))


def resolved_from(bundle: Bundle, directory: Path) -> ResolvedEval:
    """The shard's :class:`ResolvedEval`, rebuilt from the bundle's data: no dataset is read, no
    grader configuration parsed, no judge resolved here (docs/grading.md)."""
    config = EvalConfig.model_validate(bundle.config)
    original = Path(bundle.eval_base_dir)
    code_dir = directory / CODE_DIR
    # Code judges import from code/; clients resolve relative paths where the eval lived, when
    # this machine has it (a process worker), else in the bundle (the image must provide them).
    base_dir = code_dir if bundle.kind == "grade-bundle" or not original.is_dir() else original
    cases = CaseTable(ResolvedCase(
        id=c.id, prompt=c.prompt, expected=c.expected, metadata=c.metadata, trials=c.trials,
        assertions=tuple(_ASSERTION.validate_python(a) for a in c.assertions),
        judges=tuple(_judge(j) for j in c.judges), mock=c.mock,
    ) for c in bundle.cases)
    pairwise = _judge(bundle.pairwise) if bundle.pairwise else None
    settings = _client_settings(config, bundle.client_settings)
    return ResolvedEval(config, directory / BUNDLE_FILE, base_dir, bundle.eval_digest, cases, pairwise,
                        settings, _graders_from(bundle.graders))


def _judge(data: dict[str, Any]) -> ResolvedJudge:
    """A resolved judge as the bundle carries it (JSON has lists where the record has tuples)."""
    return ResolvedJudge(**{**data, "secrets": tuple(data.get("secrets", ()))})


def _client_settings(config: EvalConfig, raw: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if not raw:
        return {}
    from mst.clients.registry import client_class

    return {v.id: client_class(v.client).settings_model.model_validate(raw[v.id]) for v in config.variants
            if v.id in raw}


def grade_plan_keep(work: GradeWork) -> dict[Key, dict[str, VerdictRecord]]:
    """The verdicts to keep, decoded from the wire once."""
    return {(k[0], k[1], int(k[2])): {name: VerdictRecord.from_json(v) for name, v in kept.items()}
            for k, kept in work.keep}


# ---------------------------------------------------------------------------------------------
# Moving a bundle through the channel


def pack(directory: Path) -> str:
    """The bundle directory as a base64 gzip tar (hard links become plain files)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=3) as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack(archive: str, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive)), mode="r:gz") as tar:
        tar.extractall(directory, filter="data")


def file_data(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def write_file_data(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(base64.b64decode(data))
    os.replace(tmp, path)
