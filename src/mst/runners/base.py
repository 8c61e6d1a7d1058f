"""The runner interface: where shard workers run, and the channel the coordinator speaks over.

A runner is opened, says which work its shards can do (``collect``, ``grade``) and how many
shards it can run, starts one worker per :class:`ShardSpec`, gives a :class:`Channel` of JSON
lines to each (protocol ``mst.shard/v1``), copies result files back, and is closed. Runners
add transport only: what a worker runs is the hidden ``mst collect`` / ``mst grade-shard``
command, the same everywhere.

Options every runner takes: ``shards`` (default 1, at most :attr:`Runner.max_shards`),
``keep`` (keep the shard directories for debugging), ``hello_timeout`` (seconds a worker has to
say hello), ``heartbeat`` (seconds between a worker's heartbeats; six missed and it is lost).
"""

from __future__ import annotations

import shutil
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from mst.config.errors import Problem, UserError
from mst.runners.bundle import write_file_data
from mst.runners.protocol import FileRef

Work = Literal["collect", "grade"]
WORKER_COMMANDS: Mapping[Work, str] = {"collect": "collect", "grade": "grade-shard"}
INLINE = "-"  # --bundle/--results value meaning "through the channel": no shared disk


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """One shard's work: ``index`` of ``count`` (0-based), its bundle directory on this machine."""

    work: Work
    index: int
    count: int
    bundle: Path


def worker_argv(spec: ShardSpec, *, bundle: str, results: str, python: str | None = None) -> list[str]:
    """The hidden command a worker runs; ``-`` for both when files move through the channel."""
    return [python or sys.executable, "-m", "mst", WORKER_COMMANDS[spec.work], "--bundle", bundle,
            "--results", results]


class Channel(ABC):
    """JSON lines to and from one worker: its stdin and its stdout."""

    @abstractmethod
    def send(self, line: str) -> None:
        """Write one line (no newline) to the worker; a closed worker is ignored."""

    @abstractmethod
    def lines(self) -> Iterator[str]:
        """The worker's lines, blocking; ends when the worker's output ends."""

    @abstractmethod
    def close(self) -> None:
        """Close the worker's stdin: it has said ``done`` and may exit."""


class ShardWorker(ABC):
    """A started worker. ``results`` is its results directory when it shares this disk."""

    channel: Channel
    results: Path | None = None
    log: Path | None = None

    def copy_back(self, files: Sequence[FileRef], dest: Path) -> None:
        """Copy result files into ``dest``: from a shared disk, or from the message itself."""
        for ref in files:
            target = dest / _safe(ref.path)
            if ref.data is not None:
                write_file_data(target, ref.data)
            elif self.results is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.results / _safe(ref.path), target)
            else:
                raise ValueError(f"result file {ref.path!r} came without its content")

    @abstractmethod
    def stop(self) -> None:
        """End the worker now (it was lost, failed, or a second Ctrl-C came)."""

    @abstractmethod
    def wait(self, timeout: float) -> int | None:
        """The worker's exit code, or None if it is still running after ``timeout`` seconds."""


def _safe(rel: str) -> Path:
    path = Path(rel)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"result path {rel!r} leaves the results directory")
    return path


@dataclass
class RunnerOptions:
    shards: int = 1
    keep: bool = False
    hello_timeout: float = 60.0
    heartbeat: float = 5.0
    own: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, object]:
        """What run.json records (``grading.runner.options``): as given, never a secret."""
        return {"shards": self.shards, "keep": self.keep, **self.own}


def parse_options(pairs: Sequence[str], own: frozenset[str]) -> RunnerOptions:
    """``key=value`` strings → options; unknown keys and bad values are user errors."""
    options = RunnerOptions()
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise UserError(Problem("--runner-option", f"expected key=value, got {pair!r}"))
        try:
            if key == "shards":
                options.shards = int(value)
                if options.shards < 1:
                    raise ValueError
            elif key == "keep":
                options.keep = value.strip().lower() in ("1", "true", "yes", "on")
            elif key in ("hello_timeout", "heartbeat"):
                setattr(options, key, float(value))
                if float(value) <= 0:
                    raise ValueError
            elif key in own:
                options.own[key] = value
            else:
                known = ", ".join(sorted({"shards", "keep", "hello_timeout", "heartbeat", *own}))
                raise UserError(Problem("--runner-option", f"unknown option {key!r}; known: {known}"))
        except ValueError:
            raise UserError(Problem("--runner-option", f"bad value for {key}: {value!r}")) from None
    return options


class Runner(ABC):
    """Where shard workers run. Subclasses register in the ``mst.runners`` entry-point group."""

    name: ClassVar[str]
    work: ClassVar[frozenset[Work]] = frozenset({"collect", "grade"})
    own_options: ClassVar[frozenset[str]] = frozenset()
    max_shards: int = 64
    shared_disk: ClassVar[bool] = True  # False: bundles and result files move through the channel

    def __init__(self, options: RunnerOptions) -> None:
        self.options = options

    def open(self) -> None:  # noqa: B027 - most runners have nothing to open
        """Connect to where workers run; before any shard starts."""

    @abstractmethod
    def start(self, spec: ShardSpec, workdir: Path) -> ShardWorker:
        """Start a worker for ``spec``; ``workdir`` is a fresh directory of this shard's own."""

    def close(self) -> None:  # noqa: B027
        """Release what :meth:`open` took."""

    def shard_count(self) -> int:
        if self.options.shards > self.max_shards:
            raise UserError(Problem("--runner-option", f"runner {self.name!r} runs at most {self.max_shards} "
                                    f"shards; got shards={self.options.shards}"))
        return self.options.shards

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "options": self.options.public()}
