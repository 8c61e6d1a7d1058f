"""The one plugin registry: every kind of plugin is looked up by name here.

mst is extended through Python entry-point groups (declared in a plugin package's
``pyproject.toml``):

========================  ==============================================================
group                     what a plugin provides
========================  ==============================================================
``mst.clients``           a client kind (a class with ``settings_model`` and ``run``)
``mst.runners``           a runner (a :class:`mst.runners.base.Runner` subclass)
``mst.datasets``          a dataset format (a loader ``(path, options) -> cases``)
``mst.judges``            a plugin judge (a callable; ``plugin: NAME`` in a judge)
========================  ==============================================================

Built-in kinds resolve from a table of ``module:attribute`` targets without scanning the
installed entry points (the scan costs milliseconds at every start); any other name is looked
up in its group. Importing a target is deferred to :func:`load`, so naming a kind imports only
that kind; :mod:`importlib.metadata` is imported only for such a lookup (with email, zipfile and
csv it is ~8% of a 1-case run: bench/perf16_startup.md, Session 7). Nothing here imports another
mst module: config stays below the engine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import importlib.metadata


@dataclass(frozen=True)
class PluginGroup:
    """One entry-point group and the built-in names that resolve without it."""

    name: str  # the entry-point group, e.g. "mst.clients"
    what: str  # how an error names one of its plugins, e.g. "client"
    builtin: dict[str, str] = field(default_factory=dict)  # a dict: tests register kinds in it


CLIENTS = PluginGroup("mst.clients", "client", {
    "agent": "mst.clients.agent:AgentClient",
    "command": "mst.clients.command:CommandClient",
    "claude-code": "mst.clients.claude_code:ClaudeCodeClient",
    "codex": "mst.clients.codex:CodexClient",
})  # fmt: skip
RUNNERS = PluginGroup("mst.runners", "runner", {
    "process": "mst.runners.process:ProcessRunner",
    "ray": "mst.runners.ray_runner:RayRunner",
    "command": "mst.runners.command:CommandRunner",
})  # fmt: skip
DATASETS = PluginGroup("mst.datasets", "dataset format", {
    "jsonl": "mst.config.datasets:load_jsonl",
    "csv": "mst.config.datasets:load_csv",
    "yaml": "mst.config.datasets:load_yaml",
    "yml": "mst.config.datasets:load_yaml",
})  # fmt: skip
JUDGES = PluginGroup("mst.judges", "judge plugin")

GROUPS = (CLIENTS, RUNNERS, DATASETS, JUDGES)


class UnknownPlugin(LookupError):
    """No built-in and no installed entry point has this name; the message lists the known ones."""

    def __init__(self, group: PluginGroup, name: str) -> None:
        self.group, self.name = group, name
        super().__init__(f"unknown {group.what} {name!r}; known: {', '.join(known(group))}")


def entry_points(group: PluginGroup, name: str) -> list[importlib.metadata.EntryPoint]:
    """The installed entry points of ``group`` named ``name`` (several when packages clash)."""
    return [ep for ep in _installed(group) if ep.name == name]


def known(group: PluginGroup) -> list[str]:
    """Every name ``group`` resolves: its built-ins and the installed entry points."""
    return sorted({*group.builtin, *(ep.name for ep in _installed(group))})


def _installed(group: PluginGroup) -> importlib.metadata.EntryPoints:
    """Every installed entry point of ``group`` (importlib.metadata imported here, on first use)."""
    import importlib.metadata

    return importlib.metadata.entry_points(group=group.name)


def load(group: PluginGroup, name: str) -> Any:
    """The object plugin ``name`` of ``group`` provides: a built-in target, else the first installed
    entry point of that name. Raises :class:`UnknownPlugin`."""
    target = group.builtin.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    found = entry_points(group, name)
    if not found:
        raise UnknownPlugin(group, name)
    return found[0].load()


def dist_version(ep: importlib.metadata.EntryPoint) -> str:
    """``Name==version`` of the distribution that provides ``ep`` (``unknown`` if none does)."""
    dist = ep.dist
    return "unknown" if dist is None else f"{dist.metadata['Name']}=={dist.version}"


def installed_dist(group: PluginGroup, name: str) -> str | None:
    """``Name==version`` of the distribution providing entry point ``group:name`` here, if any."""
    found = entry_points(group, name)
    return dist_version(found[0]) if found and found[0].dist is not None else None
