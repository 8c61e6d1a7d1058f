"""The agentic judge's workspace: a fresh, read-only folder holding what the judge reads.

Layout (docs/grading.md, "Agentic judges"), one trial::

    task.json            the case: id, prompt, expected, metadata
    transcript.jsonl     the trial's transcript, as stored
    transcript.md        the same, readable (mst.session.render)
    artifacts/...        the files the client produced

and for a pairwise judge the trial's part twice, under neutral labels: ``A/`` and ``B/``.

A workspace must be ready in milliseconds even for a trial with 100 MB of artifacts, so files
are *hard links* to the run's own files whenever the filesystem allows (one system call each,
no bytes copied); only where it does not (another filesystem) are they copied. To keep links
possible the workspace is made in the system's temporary folder when that is on the run's
filesystem, else in a hidden folder of the run itself (``.judge-workspaces/``).

Read-only: every folder is made ``r-x`` and every file mst writes ``r--``. The linked files are
the run's own, so their modes are left as they are (changing them would change the stored run);
what keeps a judge from writing through a link is its CLI's read-only tool set (Claude Code:
``Read``, ``Grep``, ``Glob`` only; Codex: ``--sandbox read-only``). The workspace is removed
when the judge is done, whatever happened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mst.grading.judges import CaseView, TrialView
from mst.session.render import render_transcript

RUN_FILE: Final = "run.json"
HIDDEN_PARENT: Final = ".judge-workspaces"
_DIR_MODE: Final = 0o555
_FILE_MODE: Final = 0o444


@dataclass(frozen=True, slots=True)
class Placed:
    """How the workspace's files got there: linked (no bytes copied) or copied."""

    linked: int = 0
    copied: int = 0

    def __add__(self, other: Placed) -> Placed:
        return Placed(self.linked + other.linked, self.copied + other.copied)


_CANNOT_LINK: Final = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES})


def _copy(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, _FILE_MODE)


def _place(src: str, dst: str) -> bool:
    """Hard-link ``src`` at ``dst``; copy it when the filesystem cannot link. True when linked."""
    try:
        os.link(src, dst)
        return True
    except OSError as exc:
        if exc.errno not in _CANNOT_LINK:
            raise
    _copy(src, dst)
    return False


def _place_tree(src: str, dst: str) -> Placed:
    """Mirror the tree ``src`` at ``dst`` (folders made, files linked); symlinks are not followed.

    Links are made relative to open folder descriptors: the kernel then walks one name per link,
    not the run's whole path, which is most of a link's cost in a deep run directory.
    """
    os.mkdir(dst)
    linked = copied = 0
    src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    dst_fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with os.scandir(src_fd) as entries:
            for entry in entries:
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    sub = _place_tree(f"{src}/{name}", f"{dst}/{name}")
                    linked, copied = linked + sub.linked, copied + sub.copied
                elif entry.is_file(follow_symlinks=False):
                    try:
                        os.link(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
                        linked += 1
                    except OSError as exc:
                        if exc.errno not in _CANNOT_LINK:
                            raise
                        _copy(f"{src}/{name}", f"{dst}/{name}")
                        copied += 1
    finally:
        os.close(src_fd)
        os.close(dst_fd)
    os.chmod(dst, _DIR_MODE)
    return Placed(linked, copied)


def _write(path: str, data: bytes) -> None:
    with open(path, "xb") as fh:
        fh.write(data)
    os.chmod(path, _FILE_MODE)


def _task_json(case: CaseView) -> bytes:
    task = {"case": case.id, "prompt": case.prompt, "expected": case.expected, "metadata": dict(case.metadata)}
    return orjson.dumps(task, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str)


def _place_trial(trial: TrialView, folder: str, budget_chars: int | None) -> Placed:
    """A trial's transcript (as stored and as Markdown) and its artifacts, into ``folder``."""
    placed = Placed()
    path = trial.transcript_path
    if path is not None:
        linked = _place(str(path), f"{folder}/transcript.jsonl")
        placed = Placed(1, 0) if linked else Placed(0, 1)
    try:
        events: Sequence[Any] = trial.events
    except Exception:  # no readable transcript: the judge sees that it has none, never an empty one
        events = ()
    if events or path is not None:
        _write(f"{folder}/transcript.md", render_transcript(events, budget_chars=budget_chars).encode())
    artifacts = trial.artifacts_dir
    if artifacts is not None and artifacts.is_dir():
        placed = placed + _place_tree(str(artifacts), f"{folder}/artifacts")
    return placed


def _run_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / RUN_FILE).is_file():
            return folder
    return None


def workspace_parent(trials: Sequence[TrialView]) -> str:
    """Where to make the workspace so its files can be links: the system's temporary folder when it
    is on the run's filesystem, else a hidden folder of the run (the first trial's)."""
    tmp = tempfile.gettempdir()
    source = next((p for t in trials for p in (t.artifacts_dir, t.transcript_path) if p is not None), None)
    if source is None or not source.exists():
        return tmp
    if os.stat(tmp).st_dev == os.stat(source).st_dev:
        return tmp
    root = _run_root(source.parent if source.is_file() else source)
    if root is None or not os.access(root, os.W_OK):
        return tmp
    parent = root / HIDDEN_PARENT
    parent.mkdir(exist_ok=True)
    return str(parent)


def build(case: CaseView, sides: Sequence[tuple[str, TrialView]], *, budget_chars: int | None = None,
          parent: str | None = None) -> tuple[Path, Placed]:
    """Make the workspace: ``sides`` is ``[("", trial)]`` for one trial, or ``[("A", a), ("B", b)]``."""
    where = parent if parent is not None else workspace_parent([t for _, t in sides])
    root = tempfile.mkdtemp(prefix="mst-judge-", dir=where)
    try:
        _write(f"{root}/task.json", _task_json(case))
        placed = Placed()
        for label, trial in sides:
            folder = f"{root}/{label}" if label else root
            if label:
                os.mkdir(folder)
            placed = placed + _place_trial(trial, folder, budget_chars)
            if label:
                os.chmod(folder, _DIR_MODE)
        os.chmod(root, _DIR_MODE)
    except BaseException:
        remove(Path(root))
        raise
    return Path(root), placed


def remove(root: Path) -> None:
    """Remove a workspace: its folders are made writable again first (they were made read-only)."""
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(f"{folder}/{name}", stat.S_IRWXU)
    with contextlib.suppress(OSError):
        os.chmod(root, stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def workspace(case: CaseView, sides: Sequence[tuple[str, TrialView]], *,
              budget_chars: int | None = None) -> Iterator[Path]:
    """A workspace for the judge's run, removed afterwards whatever happened."""
    root, _ = build(case, sides, budget_chars=budget_chars)
    try:
        yield root
    finally:
        remove(root)


__all__ = ["HIDDEN_PARENT", "Placed", "build", "remove", "workspace", "workspace_parent"]
