"""The public API: ``mst`` and its packages export their names lazily, and each name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY_PACKAGES = ["mst", "mst.config", "mst.runs", "mst.report"]
EAGER_PACKAGES = ["mst.clients", "mst.graders", "mst.grading", "mst.providers", "mst.runners", "mst.session",
                  "mst.statistics", "mst.cli"]  # fmt: skip


@pytest.mark.parametrize("package", LAZY_PACKAGES + EAGER_PACKAGES)
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__, package
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
        assert name in dir(module)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_table_matches_all(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module._EXPORTS) | ({"__version__"} if package == "mst" else set()) == set(module.__all__)
    for name, home in module._EXPORTS.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_unknown_name_is_an_attribute_error() -> None:
    import mst

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mst.nope  # type: ignore[attr-defined]


def test_public_names_are_the_real_objects() -> None:
    import mst
    from mst import endings
    from mst.config.models import EvalConfig
    from mst.grading.judges import TrialView, Verdict

    assert mst.EvalConfig is EvalConfig
    assert mst.Verdict is Verdict and mst.TrialView is TrialView
    assert mst.Trial is endings.Trial and mst.Infrastructure is endings.Infrastructure
    assert callable(mst.run_eval) and callable(mst.grade) and callable(mst.resume_run)


def test_importing_mst_and_the_cli_loads_no_engine() -> None:
    """``mst --help`` / ``--version`` stay instant: the package and the CLI import no engine module."""
    code = ("import sys, mst, mst.cli, mst.config, mst.runs, mst.report; "
            "heavy = [m for m in sys.modules if m in ('pydantic', 'mst.api', 'mst.endings', 'mst.grading', "
            "'mst.runners', 'mst.config.models', 'mst.runs.run', 'rich', 'orjson')]; print(heavy)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
