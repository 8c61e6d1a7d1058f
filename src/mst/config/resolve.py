"""Resolution, on the coordinator only: eval file → :class:`ResolvedEval`.

Datasets are read, client settings validated by each client kind, eval-level assertions and
judges applied to every case, and every judge given an identity. Everything after this step
reads the resolved eval and never a dataset or a plugin registry again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mst.config.datasets import load_dataset
from mst.config.errors import Problem, UserError
from mst.config.load import EvalFile, load_eval, problems_from
from mst.config.models import CaseConfig, EvalConfig, JudgeConfig, PairwiseConfig
from mst.config.plugins import CLIENTS, UnknownPlugin, load
from mst.config.resolved import CaseTable, ResolvedEval, ResolvedJudge
from mst.config.yamlfile import subnode


def resolve_eval(path: Path) -> ResolvedEval:
    loaded = load_eval(path)
    config, digest = loaded.config, loaded.digest
    base_dir = path.resolve().parent
    problems: list[Problem] = []
    settings = _client_settings(loaded, str(path), problems)
    del loaded  # its node tree (a million objects for 20,000 inline cases) serves nothing more,
    # and each garbage collection while the cases resolve would sweep it
    cases = _cases(config, path, base_dir, problems)
    pairwise = _judge(config.pairwise, base_dir, str(path), "pairwise", problems) if config.pairwise else None
    graders = _graders(config, str(path), base_dir, problems)
    if problems:
        raise UserError(problems)
    return ResolvedEval(config, path, base_dir, digest, cases, pairwise, settings, graders)


def _client_settings(loaded: EvalFile, file: str, problems: list[Problem]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, variant in enumerate(loaded.config.variants):
        try:
            cls = load(CLIENTS, variant.client)
        except UnknownPlugin as exc:
            problems.append(Problem(file, str(exc), f"variants[{i}].client"))
            continue
        model: type[BaseModel] = cls.settings_model
        try:
            out[variant.id] = model.model_validate(variant.settings)
        except ValidationError as exc:
            raw = loaded.data["variants"][i].get("settings", {})
            sub = subnode(loaded.node, ["variants", i, "settings"])
            problems.extend(problems_from(exc, raw, file, sub, f"variants[{i}].settings"))
    return out


def _cases(config: EvalConfig, path: Path, base_dir: Path, problems: list[Problem]) -> CaseTable:
    """The eval's cases, added to a :class:`CaseTable` as they are read (no object per case)."""
    seen: set[str] = set()  # a case's place is found again only when another repeats its id
    resolved = CaseTable()
    shared = _shared()
    judges_cache: dict[str, ResolvedJudge] = {}
    # Most cases add no assertions or judges of their own: theirs are the eval's, made once.
    eval_assertions = shared(tuple(config.assertions))
    no_judges = shared(())
    for case, where in _case_configs(config, path, base_dir, problems):
        if case.id in seen:
            first = _place_of(case.id, config, path, base_dir)
            problems.append(Problem(str(path), f"case id {case.id!r} at {where} repeats the one at {first}"))
            continue
        seen.add(case.id)
        if case.mock:
            _check_mock(case.mock, where, problems)
        own = case.assertions
        assertions = shared(tuple([*config.assertions, *own])) if own else eval_assertions
        judges = no_judges
        if config.judges or case.judges:
            judges = shared(_case_judges([*config.judges, *case.judges], judges_cache, base_dir, path, problems))
        resolved.add(case.id, case.prompt, case.expected, case.metadata, case.trials or config.trials,
                     assertions, judges, case.mock)
    return resolved


def _place_of(case_id: str, config: EvalConfig, path: Path, base_dir: Path) -> str:
    """Where the first case of id ``case_id`` is (the cases read again: only for the problem
    of a repeated id; keeping every case's place held ~130 bytes a case while resolving)."""
    return next(where for case, where in _case_configs(config, path, base_dir, []) if case.id == case_id)


def _case_judges(configs: list[JudgeConfig], cache: dict[str, ResolvedJudge], base_dir: Path, path: Path,
                 problems: list[Problem]) -> tuple[ResolvedJudge, ...]:
    """A case's judges, each resolved once per definition (``cache``); one that fails to resolve
    is a problem and left out."""
    judges = []
    for j in configs:
        key = j.model_dump_json()
        if key not in cache:
            r = _judge(j, base_dir, str(path), f"judge {j.id}", problems)
            if r is None:
                continue
            cache[key] = r
        judges.append(cache[key])
    return tuple(judges)


def _case_configs(config: EvalConfig, path: Path, base_dir: Path, problems: list[Problem]
                  ) -> Iterator[tuple[CaseConfig, str]]:
    """Inline cases, then each dataset's, one at a time: the raw rows are never all in memory."""
    for i, c in enumerate(config.cases):
        yield c, f"{path}: cases[{i}]"
    for i, ds in enumerate(config.datasets):
        ds_path = (base_dir / ds.path) if ds.path else None
        try:
            for item, where in load_dataset(ds_path, ds.format, ds.options):
                try:
                    case = CaseConfig.model_validate(item)
                except ValidationError as exc:
                    file, _, line = where.rpartition(":")
                    for p in problems_from(exc, item, file or where):
                        problems.append(Problem(p.file, p.message, f"datasets[{i}] case {p.path}".rstrip(),
                                                int(line) if line.isdigit() else None))
                    continue
                yield case, where
        except UserError as exc:
            problems.extend(_in_eval_file(p, str(path), f"datasets[{i}]") for p in exc.problems)


def _in_eval_file(problem: Problem, file: str, field: str) -> Problem:
    """A dataset problem that names no file (no 'path', an unknown plugin) is about the eval
    file's own ``datasets`` entry: name that file and field."""
    if problem.file:
        return problem
    return Problem(file, problem.message, f"{field}.{problem.path}".rstrip("."), problem.line)


def _shared() -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """Cases with the same assertions (or judges) get one tuple: most cases only have the
    eval's own, and an eval may have tens of thousands of cases."""
    seen: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def share(items: tuple[Any, ...]) -> tuple[Any, ...]:
        return seen.setdefault(tuple(map(id, items)), items)  # the items outlive the resolution

    return share


def _check_mock(mock: dict[str, Any], where: str, problems: list[Problem]) -> None:
    """A case's mock script is checked when the eval loads, not when its first attempt runs."""
    from mst.providers.mock import MockSettings

    try:
        MockSettings.model_validate(mock)
    except ValidationError as exc:
        file, _, place = where.partition(": ")
        for p in problems_from(exc, mock, file):
            problems.append(Problem(p.file, p.message, f"{place or 'case'}.mock.{p.path}".rstrip(".")))


def _judge(
    cfg: JudgeConfig | PairwiseConfig, base_dir: Path, file: str, where: str, problems: list[Problem]
) -> ResolvedJudge | None:
    from mst.grading.judges import JudgeLoadError, resolve_judge

    try:
        return resolve_judge(cfg, base_dir)
    except JudgeLoadError as exc:
        problems.append(Problem(file, str(exc), where))
        return None


def _graders(config: EvalConfig, file: str, base_dir: Path, problems: list[Problem]) -> Any:
    from mst.graders import GradersConfigError, parse_graders_config, validate_metric_refs

    try:
        graders = parse_graders_config(config.graders, base_dir=base_dir)
    except GradersConfigError as exc:
        for field_path, message in exc.errors:
            problems.append(Problem(file, message, field_path))
        return None
    for error in validate_metric_refs(config.metrics, graders):
        field_path, _, message = error.partition(": ")
        problems.append(Problem(file, message, field_path))
    return graders
