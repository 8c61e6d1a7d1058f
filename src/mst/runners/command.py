"""The ``command`` runner: a worker on any machine a command reaches (ssh, docker exec, kubectl exec).

The ``template`` option prefixes the worker's argv, e.g. ``ssh gpu-box {argv}`` or
``docker exec -i box {argv}``: ``{argv}`` as a word of its own becomes the worker's argv words;
inside a word (``sh -c 'cd /srv && {argv}'``) it becomes the argv quoted for a shell. The remote
machine shares no disk with the coordinator, so the bundle and every result file move through
the channel. The ``python`` option names the remote interpreter (default: this one's path).

The launch command gets the small environment a local worker gets, plus what launchers such as
ssh, docker and kubectl read (their agent socket and config); secrets never, they travel in the
``tokens`` message only.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import ClassVar

from mst.config.errors import Problem, UserError
from mst.runners.base import INLINE, Runner, ShardSpec, ShardWorker, worker_argv
from mst.runners.process import PipeWorker, worker_env

LAUNCHER_ENV = ("USER", "SSH_AUTH_SOCK", "DOCKER_HOST", "DOCKER_CONFIG", "KUBECONFIG")


def expand(template: str, argv: list[str]) -> list[str]:
    """The launch command: ``template`` with ``{argv}`` replaced by the worker's argv."""
    words = shlex.split(template)
    if not any("{argv}" in w for w in words):
        raise UserError(Problem("--runner-option", "the command runner's template must contain {argv}"))
    out: list[str] = []
    for word in words:
        if word == "{argv}":
            out.extend(argv)
        else:
            out.append(word.replace("{argv}", shlex.join(argv)))
    return out


class CommandRunner(Runner):
    name: ClassVar[str] = "command"
    own_options: ClassVar[frozenset[str]] = frozenset({"template", "python"})
    shared_disk: ClassVar[bool] = False
    max_shards = 64

    def open(self) -> None:
        if "template" not in self.options.own:
            raise UserError(Problem("--runner-option", "the command runner needs template=..., e.g. "
                                    "'template=ssh host {argv}'"))
        expand(self.options.own["template"], [])

    def start(self, spec: ShardSpec, workdir: Path) -> ShardWorker:
        argv = worker_argv(spec, bundle=INLINE, results=INLINE, python=self.options.own.get("python"))
        launcher = {k: os.environ[k] for k in LAUNCHER_ENV if k in os.environ}
        return PipeWorker(expand(self.options.own["template"], argv), env=worker_env(launcher),
                          log=workdir / "worker.log", results=None, cwd=workdir)
