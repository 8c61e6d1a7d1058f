"""Runners and shards (docs/shards.md, docs/wire-protocol.md): collect and grade on worker processes,
a Ray cluster, or any machine a command reaches, over the ``mst.shard/v1`` channel.

Runners compose ``collect`` and ``grading`` and add transport only. The public surface:
:class:`~mst.runners.base.Runner` (subclass it and register it in the ``mst.runners``
entry-point group), :class:`~mst.runners.base.ShardSpec`, :func:`~mst.runners.registry.open_runner`,
:func:`~mst.runners.sharding.shard_of`, and :mod:`mst.runners.protocol` (the messages).
"""

from mst.runners.base import Channel, Runner, RunnerOptions, ShardSpec, ShardWorker, Work
from mst.runners.registry import open_runner, runner_class
from mst.runners.sharding import shard_of

__all__ = ["Channel", "Runner", "RunnerOptions", "ShardSpec", "ShardWorker", "Work", "open_runner", "runner_class",
           "shard_of"]
