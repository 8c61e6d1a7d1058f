"""What keeps a command's start cheap (issue 16, bench/perf16_startup.md), held without timing."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from mst.cli.main import _importing, main


def _models(root: type[BaseModel]) -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for field in model.model_fields.values():
            todo += [t for t in _types_in(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return seen


def _types_in(annotation: object) -> list[object]:
    out = [annotation]
    for arg in getattr(annotation, "__args__", ()):
        out += _types_in(arg)
    return out


def test_config_models_have_no_builtin_default_factory() -> None:
    """pydantic reads a builtin factory's signature with tokenize (≈ 8 ms at every start)."""
    from mst.config.models import EvalConfig
    from mst.providers.mock import MockSettings

    models = _models(EvalConfig) | _models(MockSettings)
    assert len(models) > 20
    lists = [f"{m.__name__}.{name}" for m in models for name, field in m.model_fields.items()
             if field.default_factory is list]  # fmt: skip
    assert lists == [], lists


def test_importing_pauses_the_collector_and_freezes_what_was_imported() -> None:
    gc.unfreeze()
    assert gc.isenabled()
    try:
        with _importing():
            assert not gc.isenabled()
            kept = [object() for _ in range(10)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
        gc.disable()
        with _importing():  # a collector already off stays off
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_version_imports_neither_the_engine_nor_stdlib_statistics() -> None:
    code = ("import sys\nfrom click.testing import CliRunner\nfrom mst.cli.main import main\n"
            "assert CliRunner().invoke(main, ['--version']).exit_code == 0\n"
            "print(sorted(m for m in ('statistics', 'pydantic', 'asyncio', 'mst.api', 'mst.store.backend')"
            " if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("store", [False, True])
def test_run_imports_the_store_backend_only_for_an_eval_with_a_store(tmp_path: Path, store: bool) -> None:
    eval_file = tmp_path / "eval.yaml"
    eval_file.write_text("name: one\nvariants: [{id: a, model: mock}]\ncases: [{id: c, prompt: p, expected: x}]\n"
                         + (f"results: {{store: 'file://{tmp_path}/store'}}\n" if store else ""))
    code = ("import sys\nfrom click.testing import CliRunner\nfrom mst.cli.main import main\n"
            f"r = CliRunner().invoke(main, ['run', {str(eval_file)!r}, '--runs-dir', {str(tmp_path / 'runs')!r},"
            " '--json'])\nassert r.exit_code == 0, r.output\nprint('mst.store.backend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == str(store)


def test_run_leaves_the_collector_enabled(tmp_path: Path) -> None:
    eval_file = tmp_path / "eval.yaml"
    eval_file.write_text("name: one\nvariants: [{id: a, model: mock}]\ncases: [{id: c, prompt: p, expected: x}]\n")
    try:
        res = CliRunner().invoke(main, ["run", str(eval_file), "--runs-dir", str(tmp_path / "runs"), "--json"])
        assert res.exit_code == 0, res.output
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_run_reads_and_validates_the_eval_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result store is taken from the eval as it was run, not from a second read of the file."""
    import mst.config.load
    import mst.config.resolve

    calls: list[Path] = []
    real = mst.config.load.load_eval

    def counted(path: Path) -> object:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(mst.config.load, "load_eval", counted)
    monkeypatch.setattr(mst.config.resolve, "load_eval", counted)
    eval_file = tmp_path / "eval.yaml"
    eval_file.write_text("name: one\nvariants: [{id: a, model: mock}]\ncases: [{id: c, prompt: p, expected: x}]\n"
                         f"results: {{store: 'file://{tmp_path}/store'}}\n")
    try:
        res = CliRunner().invoke(main, ["run", str(eval_file), "--runs-dir", str(tmp_path / "runs"), "--json"])
    finally:
        gc.unfreeze()
    assert res.exit_code == 0, res.output
    assert calls == [eval_file]
    assert "stored: " in res.stderr
    assert any((tmp_path / "store").iterdir())


@pytest.mark.parametrize(
    "module_name",
    ["mst.config.models", "mst.config.judge_llm", "mst.config.judge_agentic", "mst.config.judge_limits",
     "mst.providers.mock", "mst.providers.settings", "mst.clients.agent"],
)
def test_settings_models_have_no_postponed_annotations(module_name: str) -> None:
    """pydantic evaluates each string annotation when it builds a model, at every start of `mst`
    (``from __future__ import annotations`` makes every field one)."""
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    models = [value for value in vars(module).values()
              if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == module_name]
    assert models
    for model in models:
        strings = {name: hint for name, hint in vars(model).get("__annotations__", {}).items() if isinstance(hint, str)}
        assert not strings, f"{model.__name__}: postponed annotations {strings}"


def _params(command: click.Command) -> list[click.Parameter]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        return [p for name in command.list_commands(ctx) for p in _params(command.get_command(ctx, name))]  # type: ignore[arg-type]
    return list(command.params)


def test_every_path_parameter_shares_one_click_type() -> None:
    """Each ``click.Path`` made looks its labels up through gettext (a locale search) at import."""
    from mst.cli.options import PATH

    paths = [p for p in _params(main) if isinstance(p.type, click.Path)]
    assert len(paths) > 10
    assert [p.name for p in paths if p.type is not PATH] == []
