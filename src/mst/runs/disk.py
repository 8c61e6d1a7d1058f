"""A disk that cannot take a run's files — full, read-only, not ours, or a file where a folder
should be — as one clear line naming the path, not a traceback.

The run stays resumable whatever was being written (docs/run-directory.md, "A disk that cannot
take the run"): files are written whole or not at all and the journals lose at most the line
being appended, so the message says to fix the disk and resume.
"""

from __future__ import annotations

import errno
import os

from mst.errors import Problem

_WHAT = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "an I/O error from the device",
}
_RESUME = "once that is fixed, resume the run (`mst run --resume RUN` or `mst grade --resume RUN`): nothing " \
          "already collected or graded is lost"


def disk_problem(exc: OSError) -> Problem | None:
    """The problem ``exc`` describes when it is the disk's doing; None for anything else (a bug)."""
    path = exc.filename if isinstance(exc.filename, str) else None
    if path is None and isinstance(exc.filename, bytes):
        path = os.fsdecode(exc.filename)
    if exc.errno == errno.ENOTDIR and path is not None:
        blocker = _file_in_the_way(path)
        return Problem(blocker or path, "is a file where mst needs a directory: move it away; " + _RESUME)
    if exc.errno == errno.EISDIR and path is not None:
        return Problem(path, "is a directory where mst needs a file: move it away; " + _RESUME)
    what = _WHAT.get(exc.errno or 0)
    if what is None or path is None:
        return None
    return Problem(path, f"{what}; {_RESUME}")


def _file_in_the_way(path: str) -> str | None:
    """The nearest ancestor of ``path`` that exists and is not a directory."""
    head = os.path.dirname(path)
    while head and head != os.path.dirname(head):
        if os.path.lexists(head):
            return head if not os.path.isdir(head) else None
        head = os.path.dirname(head)
    return None
