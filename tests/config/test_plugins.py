"""The one plugin registry: every entry-point group, its built-ins, lookups and errors."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mst.config import plugins
from mst.config.plugins import CLIENTS, DATASETS, GROUPS, JUDGES, RUNNERS, UnknownPlugin

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def test_groups_are_every_group_mst_declares_and_uses() -> None:
    declared = set(PYPROJECT["project"]["entry-points"])
    assert declared <= {g.name for g in GROUPS}
    assert {g.name for g in GROUPS} == {"mst.clients", "mst.runners", "mst.datasets", "mst.judges"}


@pytest.mark.parametrize("group", [CLIENTS, RUNNERS, DATASETS])
def test_builtins_agree_with_the_packages_own_entry_points(group: plugins.PluginGroup) -> None:
    """A built-in resolves without the scan, to what the installed entry point names."""
    for name, target in PYPROJECT["project"]["entry-points"][group.name].items():
        assert group.builtin[name] == target


@pytest.mark.parametrize("group", [CLIENTS, RUNNERS, DATASETS])
def test_every_builtin_loads(group: plugins.PluginGroup) -> None:
    for name in group.builtin:
        assert plugins.load(group, name) is not None


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPlugin, match=r"unknown dataset format 'txt'; known: csv, jsonl, yaml, yml"):
        plugins.load(DATASETS, "txt")


def test_an_installed_entry_point_is_found_and_versioned(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = importlib.metadata.EntryPoint("shout", f"{__name__}:_shout", JUDGES.name)
    real = importlib.metadata.entry_points

    def fake(**kw: Any) -> Any:
        return [ep] if kw.get("group") == JUDGES.name else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    assert plugins.load(JUDGES, "shout") is _shout
    assert "shout" in plugins.known(JUDGES)
    assert plugins.entry_points(JUDGES, "shout") == [ep]
    assert plugins.dist_version(ep) == "unknown" and plugins.installed_dist(JUDGES, "shout") is None


def test_the_call_sites_use_the_registry() -> None:
    from mst.clients import registry as clients
    from mst.config.datasets import load_csv, loader_for
    from mst.errors import UserError
    from mst.runners import registry as runners

    assert clients.BUILTIN is CLIENTS.builtin and runners.BUILTIN is RUNNERS.builtin
    assert loader_for("csv") is load_csv
    with pytest.raises(UserError, match="unknown runner 'nope'"):
        runners.runner_class("nope")
    with pytest.raises(UserError, match="unknown dataset format 'nope'"):
        loader_for("nope")


def _shout(*args: Any) -> str:
    return "!"
