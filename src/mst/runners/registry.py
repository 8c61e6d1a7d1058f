"""Runners by name, through the one plugin registry (:mod:`mst.config.plugins`)."""

from __future__ import annotations

from collections.abc import Sequence

from mst.config.errors import Problem, UserError
from mst.config.plugins import RUNNERS, UnknownPlugin, load
from mst.runners.base import Runner, Work, parse_options

BUILTIN = RUNNERS.builtin


def runner_class(name: str) -> type[Runner]:
    """The class of runner ``name``; built-ins resolve without scanning entry points."""
    try:
        loaded = load(RUNNERS, name)
    except UnknownPlugin as exc:
        raise UserError(Problem("--runner", str(exc))) from None
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
