"""The ``mst`` command line: parse arguments, call the library, print. Nothing imports this package.

``mst.cli:main`` is the console entry point; the commands live in :mod:`mst.cli.main`, the
graders and experiments groups in :mod:`mst.cli.graders` and ``mst gate`` / ``mst plan`` in
:mod:`mst.cli.stats` (each imported only when one is used); options several commands share are
in :mod:`mst.cli.options`.
"""

from mst.cli.main import main

__all__ = ["main"]
