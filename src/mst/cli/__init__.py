"""The ``mst`` command line: parse arguments, call the library, print. Nothing imports this package.

``mst.cli:main`` is the console entry point; the commands live in :mod:`mst.cli.main`, the
graders and experiments groups in :mod:`mst.cli.graders` and ``mst gate`` / ``mst plan`` in
:mod:`mst.cli.stats` (each imported only when one is used); options several commands share are
in :mod:`mst.cli.options`.
"""

import gc

# click and the commands are imported with the cycle collector paused: what an import makes is kept
# for the whole process, so a collection during it frees nothing, and `mst run` / `mst grade` then
# freeze it all (mst.cli.main._importing; bench/perf16_startup.md, Session 6).
_collecting = gc.isenabled()
gc.disable()
try:
    from mst.cli.main import main
finally:
    if _collecting:
        gc.enable()
    del _collecting

__all__ = ["main"]
