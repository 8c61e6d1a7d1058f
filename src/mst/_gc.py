"""The cyclic garbage collector paused for one linear pass (a leaf: any layer may use it).

Building session lookups, grader inputs and an eval file's node tree all allocate many small
acyclic objects while a large structure is live; each automatic collection would traverse the
whole structure, which made such a pass several times slower than its work and its cost grow
faster than linearly.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_SMALL_PASS = 1000  # items: too few for a collection to sweep them often


@contextmanager
def paused_gc(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector for a linear pass over ``size`` items (events of a
    session, nodes of a YAML file).

    Collection is re-enabled on exit (also on error) if it was enabled before; nothing allocated
    in such a pass forms a cycle. A small pass (most trials) is left alone: pausing would cost
    more than it saves.
    """
    if size < _SMALL_PASS:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
