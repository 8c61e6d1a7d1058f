"""Runners by name: the built-ins, then the ``mst.runners`` entry-point group (plugins)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from mst.config.errors import Problem, UserError
from mst.runners.base import Runner, Work, parse_options

GROUP = "mst.runners"
BUILTIN = {"process": "mst.runners.process:ProcessRunner", "ray": "mst.runners.ray_runner:RayRunner",
           "command": "mst.runners.command:CommandRunner"}


def runner_class(name: str) -> type[Runner]:
    """The class of runner ``name``; built-ins resolve without scanning entry points."""
    target = BUILTIN.get(name)
    loaded: Any
    if target is not None:
        module, _, attr = target.partition(":")
        loaded = getattr(import_module(module), attr)
    else:
        found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
        if not found:
            known = sorted({*BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})
            raise UserError(Problem("--runner", f"unknown runner {name!r}; known: {', '.join(known)}"))
        loaded = found[0].load()
    if not (isinstance(loaded, type) and issubclass(loaded, Runner)):
        raise UserError(Problem("--runner", f"runner {name!r} is not a mst Runner class"))
    return loaded


def open_runner(name: str, option_pairs: Sequence[str], work: Work) -> Runner:
    """Open runner ``name``; refuses, right after opening and before any shard, one without ``work``."""
    cls = runner_class(name)
    runner = cls(parse_options(option_pairs, cls.own_options))
    runner.open()
    try:
        if work not in runner.work:
            raise UserError(Problem("--runner", f"runner {name!r} cannot {work}: it runs "
                                    f"{', '.join(sorted(runner.work)) or 'nothing'}"))
        runner.shard_count()
    except BaseException:
        runner.close()
        raise
    return runner
