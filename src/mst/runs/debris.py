"""What a crash leaves behind, and removing it without ever touching a live process's files.

A process killed at the wrong instant leaves temporary names behind (docs/run-directory.md,
"What a crash leaves, and who removes it"):

* ``.<name>.<pid>.tmp`` — an atomic write cut short (beside run.json, results.json, in
  ``graders/…``, beside ``latest.json``);
* ``.<run-id>.<pid>.staging`` — a new run (or regrade) directory not yet renamed into place;
* ``mst-<work>-shards-<pid>-…`` and ``mst-worker-<pid>-…`` — a coordinator's or a shard
  worker's work directory in ``$TMPDIR``.

Every one of them carries the pid of the process that made it, and that process holds an
exclusive ``flock`` on it (its open file, or its directory) while it writes there. A leftover is
removed only when **both** say its owner is gone: the pid is not a live process on this machine,
and the lock can be taken. The pid alone is not enough (a runs directory shared between
containers sees other pid namespaces); the lock alone is not enough (there is an instant between
creating a name and locking it). A work directory's lock is shared with the shard workers the
coordinator starts (they inherit the locked descriptor), so it stays held until the last of them
has exited, and a worker still finishing never has its directory removed under it.

Removal is best effort: a leftover that cannot be removed (a read-only disk) stays for a later
sweep, and never stops the run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mst.errors import Problem, UserError

TMP_FILE = re.compile(r"^\..+\.(\d+)\.tmp$")
STAGING_DIR = re.compile(r"^\..+\.(\d+)\.staging$")
SWEPT_TREES = ("transcripts", "graders")  # where mst itself writes a run's files
WORK_DIR = re.compile(r"^mst-(?:collect-shards|grade-shards|worker)-(\d+)-")
KEPT = re.compile(r"^(mst-(?:collect-shards|grade-shards|worker)-)(\d+-)")
# How long a command's closing sweep waits for a dead coordinator's workers to let go of its work
# directory (they notice the coordinator is gone when their channel closes, after their imports).
SETTLE_S = 5.0
_POLL_S = 0.05


def staging_name(run_id: str) -> str:
    return f".{run_id}.{os.getpid()}.staging"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process here (a process of another user counts as live)."""
    if pid <= 0:
        return True  # not a pid we can judge: treat as live, so nothing is removed
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_fd(fd: int, *, wait: bool = False) -> bool:
    """An exclusive flock on ``fd``; False when another open file holds one (and not ``wait``)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _open_dir(path: str | Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))


def _owner_gone(path: str, pid: int, *, directory: bool, until: float = 0.0) -> bool:
    """Both tests of the module docstring: the pid is dead and nobody holds the lock.

    ``until`` (a ``time.monotonic()`` deadline): when the owner is dead but the lock is held —
    its orphaned shard workers, still ending — wait for them up to then.
    """
    if pid_alive(pid):
        return False
    try:
        fd = _open_dir(path) if directory else os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        while not lock_fd(fd):
            if time.monotonic() >= until:
                return False
            time.sleep(_POLL_S)
        return True
    finally:
        os.close(fd)  # the lock goes with it; the leftover is removed right after


def _remove(path: str, *, directory: bool) -> None:
    with contextlib.suppress(OSError):
        if directory:
            shutil.rmtree(path)
        else:
            os.unlink(path)


def _sweep_entries(folder: str, pattern: re.Pattern[str], *, directories: bool, until: float = 0.0) -> list[str]:
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None:
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir != directories:
            continue
        if _owner_gone(entry.path, int(match.group(1)), directory=directories, until=until):
            _remove(entry.path, directory=directories)
            removed.append(entry.path)
    return removed


def sweep_run_dir(root: Path) -> list[str]:
    """Remove the temporary files crashed writers left in a run directory: beside its files,
    and under ``transcripts/`` and ``graders/`` — never under ``artifacts/``, whose files are
    the client's own, whatever their names.

    Called with the run's lock held (:class:`RunLock`), so no other mst writes here; the owner
    test is applied all the same.
    """
    base = os.fspath(root)
    removed = _sweep_entries(base, TMP_FILE, directories=False)
    for sub in SWEPT_TREES:
        for folder, _, names in os.walk(os.path.join(base, sub)):
            if any(TMP_FILE.match(name) for name in names):
                removed += _sweep_entries(folder, TMP_FILE, directories=False)
    return removed


def sweep_runs_dir(runs_dir: Path) -> list[str]:
    """Remove crashed runs' staging directories and ``latest.json`` temp files from ``runs_dir``."""
    folder = os.fspath(runs_dir)
    return _sweep_entries(folder, STAGING_DIR, directories=True) + _sweep_entries(folder, TMP_FILE, directories=False)


def sweep_work_dirs(parent: str | None = None, *, settle_s: float = 0.0) -> list[str]:
    """Remove dead coordinators' and workers' work directories from ``parent`` (``$TMPDIR``).

    ``settle_s``: wait up to that long, in all, for the orphaned workers of a dead coordinator
    to exit and release its directory (a command's closing sweep; the opening one never waits).
    """
    until = time.monotonic() + settle_s if settle_s > 0 else 0.0
    return _sweep_entries(parent or tempfile.gettempdir(), WORK_DIR, directories=True, until=until)


def sweep_all(run_root: Path | None, runs_dir: Path, *, closing: bool = False) -> None:
    """What every command that writes runs sweeps first and last: the run, its runs directory,
    $TMPDIR. The ``closing`` sweep waits a little (:data:`SETTLE_S`) for a killed coordinator's
    workers, which may still have been starting when the command began."""
    if run_root is not None:
        sweep_run_dir(run_root)
    sweep_runs_dir(runs_dir)
    sweep_work_dirs(settle_s=SETTLE_S if closing else 0.0)


# ---------------------------------------------------------------------------------------------
# Owned directories


_SHARED_LOCKS: set[int] = set()  # descriptors of owned work directories, for shard workers to inherit


@dataclass
class OwnedDir:
    """A directory this process made and holds locked: removed by :meth:`close`, or by the next
    sweep once the process (and every child that inherited :attr:`fd`) is gone."""

    path: Path
    fd: int

    def close(self, *, keep: bool = False) -> None:
        """Remove the directory; with ``keep`` (for debugging) rename it out of the sweep's way
        instead (``mst-grade-shards-kept-…``): :attr:`path` is then its new name."""
        if keep:
            kept = self.path.with_name(KEPT.sub(r"\1kept-\2", self.path.name, count=1))
            with contextlib.suppress(OSError):
                self.path = self.path.rename(kept)
        else:
            shutil.rmtree(self.path, ignore_errors=True)
        if self.fd >= 0:
            _SHARED_LOCKS.discard(self.fd)
            os.close(self.fd)
            self.fd = -1


def owned_dir(prefix: str, parent: str | Path | None = None, *, share: bool = False) -> OwnedDir:
    """``<parent>/<prefix><pid>-<random suffix>``, created and locked (see the module docstring).

    ``share``: the shard workers this process starts inherit the locked descriptor
    (:func:`locks_for_children`), so the directory counts as in use until they have all exited.
    """
    path = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)
    fd = _open_dir(path)
    lock_fd(fd, wait=True)  # new and ours: nobody else can hold it
    if share:
        _SHARED_LOCKS.add(fd)
    return OwnedDir(Path(path), fd)


def locks_for_children() -> tuple[int, ...]:
    """The descriptors a started shard worker keeps open (``pass_fds``): see :func:`owned_dir`."""
    return tuple(sorted(_SHARED_LOCKS))


def new_locked_dir(path: Path) -> int:
    """Make ``path`` (FileExistsError when it exists) and return its descriptor, locked."""
    path.mkdir()
    fd = _open_dir(path)
    lock_fd(fd, wait=True)
    return fd


# ---------------------------------------------------------------------------------------------
# The run lock


class RunLock:
    """An exclusive flock on a run directory, held while a command writes into it.

    Two commands writing one run at once (two resumes, a resume and a grade --resume) would
    collect or grade the same attempt twice; the second is refused with a clear error instead.
    Holding it also makes the sweep of the run's temporary files safe.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def take(cls, root: Path) -> RunLock:
        try:
            fd = _open_dir(root)
        except FileNotFoundError:
            raise UserError(Problem(str(root), "not a run directory (it does not exist)")) from None
        except NotADirectoryError:
            raise UserError(Problem(str(root), "not a run directory (it is a file)")) from None
        if not lock_fd(fd):
            os.close(fd)
            raise UserError(Problem(str(root), "another mst command is writing this run now; "
                                    "wait for it to end (two at once would collect or grade twice)"))
        return cls(fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def run_lock(root: Path) -> Iterator[RunLock]:
    """Hold ``root``'s lock for the body, sweeping what earlier crashes left before it and again
    after it (a killed coordinator's workers, still ending at the start, have ended by then)."""
    lock = RunLock.take(root)
    ours = (root / "run.json").is_file()  # only a run's own directory is swept, never any other
    try:
        if ours:
            sweep_all(root, root.parent)
        yield lock
    finally:
        if ours:
            sweep_all(None, root.parent, closing=True)
        lock.release()
