"""Run one untrusted process with bounded time and output, and kill its whole process group.

Both custom-grader runtimes (Node for JavaScript, Bash for ``operational-value``) need the same
guarantees, so they share this one loop: the child starts in a new session (its own process
group), stdin is fed and stdout/stderr are drained *concurrently* through one selector (a child
blocked writing to a full stderr pipe while we wait on stdout would otherwise hang until the
timeout), each stream is capped, and on a deadline or an overflow the group is killed with
SIGKILL. When the leader exits, anything it left running in its group (``sleep 999 &``) is killed
too, before the leader is reaped, so the group id cannot have been reused by then.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MIB: Final = 1024 * 1024
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Bounded:
    """What a bounded run produced. ``timed_out`` and ``overflow`` say why it was killed (if it was);
    ``returncode`` is negative for a signal, as in :mod:`subprocess`."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflow: str | None
    elapsed: float

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def size_text(size: int) -> str:
    """1048576 → '1 MiB', 300 → '300 bytes': limits read as they were configured."""
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} bytes"


Progress = Callable[[bytes], bool]
"""Called with all stdout so far after each read; True extends the deadline (a result arrived)."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group; the leader is not reaped yet, so the id is still ours."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _leader_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Has the leader exited? Checked without reaping it (WNOWAIT), so its group id stays reserved."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


class _Loop:
    """The selector loop of one run; small methods so each rule is visible on its own."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin: bytes, max_output: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.pending = memoryview(stdin)
        self.max_output = max_output
        self.out = bytearray()
        self.err = bytearray()
        self.overflow: str | None = None
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        self.sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        os.set_blocking(proc.stdin.fileno(), False)
        if self.pending:
            self.sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
        else:
            proc.stdin.close()

    def open_streams(self) -> int:
        return sum(1 for key in self.sel.get_map().values() if key.data != "stdin")

    def step(self, timeout: float) -> bool:
        """One select round; returns True when new stdout arrived."""
        grew = False
        for key, _ in self.sel.select(timeout):
            if key.data == "stdin":
                self._write()
            else:
                grew |= self._read(key.fileobj, str(key.data))
        return grew

    def _write(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            written = os.write(stdin.fileno(), self.pending[:_CHUNK])
            self.pending = self.pending[written:]
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            self.pending = self.pending[:0]
        if not self.pending:
            self.sel.unregister(stdin)
            stdin.close()

    def _read(self, fileobj: object, name: str) -> bool:
        fd = fileobj.fileno()  # type: ignore[attr-defined]
        data = os.read(fd, _CHUNK)
        if not data:
            self.sel.unregister(fileobj)  # type: ignore[arg-type]
            return False
        buf = self.out if name == "stdout" else self.err
        buf += data
        if len(buf) > self.max_output:
            self.overflow = f"{name} exceeded the {size_text(self.max_output)} output limit"
        return name == "stdout"

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
        self.sel.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdin: bytes = b"",
    timeout: float,
    max_output: int = MIB,
    progress: Progress | None = None,
    step_timeout: float | None = None,
) -> Bounded:
    """Run ``argv`` with exactly ``env`` (nothing inherited), in ``cwd``, within the bounds.

    ``timeout`` is the wall-clock budget until the first progress (or the end); each time
    ``progress`` reports a new result the deadline moves to now + ``step_timeout``. Output past
    ``max_output`` on either stream, or the deadline, kills the whole process group.
    """
    started = time.monotonic()
    deadline = started + timeout
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(env), cwd=cwd, start_new_session=True, close_fds=True,
    )  # fmt: skip
    loop = _Loop(proc, stdin, max_output)
    timed_out = False
    try:
        while loop.open_streams() and loop.overflow is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if loop.step(min(remaining, 0.05)) and progress is not None and progress(bytes(loop.out)):
                deadline = time.monotonic() + (step_timeout if step_timeout is not None else timeout)
            if _leader_exited(proc):
                _drain_after_exit(loop, deadline)
                break
    finally:
        _kill_group(proc)
        loop.close()
        returncode = proc.wait()
    return Bounded(returncode, bytes(loop.out), bytes(loop.err), timed_out, loop.overflow,
                   time.monotonic() - started)  # fmt: skip


def _drain_after_exit(loop: _Loop, deadline: float) -> None:
    """The leader exited: kill what it left in its group, then read what is still buffered."""
    _kill_group(loop.proc)
    while loop.open_streams() and loop.overflow is None and time.monotonic() < deadline:
        loop.step(0.05)
