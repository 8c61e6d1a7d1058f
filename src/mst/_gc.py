"""The cyclic garbage collector paused for one linear pass (a leaf: any layer may use it).

Building session lookups, grader inputs and an eval file's node tree all allocate many small
acyclic objects while a large structure is live; each automatic collection would traverse the
whole structure, which made such a pass several times slower than its work and its cost grow
faster than linearly.
"""

from __future__ import annotations

import gc
from types import TracebackType

SMALL_PASS = 1000  # items: too few for a collection to sweep them often


class paused_gc:
    """Pause the cyclic garbage collector for a linear pass over ``size`` items (events of a
    session, nodes of a YAML file).

    Collection is re-enabled on exit (also on error) if it was enabled before; nothing allocated
    in such a pass forms a cycle. A small pass (most trials) is left alone: pausing would cost
    more than it saves. A class rather than a generator-based context manager: it is entered
    once or twice per trial graded, where the generator machinery cost more than the pass of a
    five-event session.
    """

    __slots__ = ("_resume", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._resume = False

    def __enter__(self) -> None:
        if self._size >= SMALL_PASS and gc.isenabled():
            gc.disable()
            self._resume = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._resume:
            self._resume = False
            gc.enable()
