"""The ``command`` runner: a worker on any machine a command reaches (ssh, docker exec, kubectl exec).

The ``template`` option prefixes the worker's argv, e.g. ``ssh gpu-box {argv}``,
``docker exec -i box {argv}`` or ``bash -c {argv}``; :func:`expand` says how ``{argv}`` is
quoted for each (quoted where a shell reads it, as it is where a program executes it). The remote
machine shares no disk with the coordinator, so the bundle and every result file move through
the channel. The ``python`` option names the remote interpreter (default: this one's path).

The launch command gets the small environment a local worker gets, plus what launchers such as
ssh, docker and kubectl read (their agent socket and config); secrets never, they travel in the
``tokens`` message only.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import ClassVar

from mst.config.errors import Problem, UserError
from mst.runners.base import INLINE, Runner, ShardSpec, ShardWorker, worker_argv
from mst.runners.process import PipeWorker, worker_env

LAUNCHER_ENV = ("USER", "SSH_AUTH_SOCK", "DOCKER_HOST", "DOCKER_CONFIG", "KUBECONFIG")


SHELL_C = re.compile(r"^-[A-Za-z]*c$")  # a shell's "run this string": -c, -lc, -ec, ...
QUOTED = "{argv_quoted}"


def expand(template: str, argv: list[str]) -> list[str]:
    """The launch command: ``template`` with ``{argv}`` replaced by the worker's argv.

    The argv is quoted exactly where a shell will read it (docs/shards.md, "The command runner's `{argv}`"):

    * ``{argv}`` inside a longer word (``sh -c 'cd /srv && {argv}'``), right after a shell's
      ``-c`` (``bash -c {argv}``, ``kubectl exec -i pod -- sh -c {argv}``), or ``{argv_quoted}``
      anywhere: one shell-quoted command line;
    * ``{argv}`` as a word of an ``ssh`` template: each word shell-quoted (ssh joins its words with
      spaces and the remote shell splits them again);
    * ``{argv}`` as a word otherwise (``docker exec -i box {argv}``, ``kubectl exec -i pod --
      {argv}``): the argv words as they are, for a launcher that executes them directly.
    """
    words = shlex.split(template)
    if not any("{argv}" in w or QUOTED in w for w in words):
        raise UserError(Problem("--runner-option", "the command runner's template must contain {argv}"))
    line = shlex.join(argv)
    over_ssh = bool(words) and os.path.basename(words[0]) == "ssh"
    out: list[str] = []
    for i, word in enumerate(words):
        if word == "{argv}" and not (i > 0 and SHELL_C.match(words[i - 1])):
            out.extend(shlex.quote(a) for a in argv) if over_ssh else out.extend(argv)
        else:
            out.append(word.replace(QUOTED, line).replace("{argv}", line))
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
