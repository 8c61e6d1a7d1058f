"""The ``mst`` command line: parse arguments, call the library, print. Nothing imports this package.

``mst.cli:main`` is the console entry point; the commands live in :mod:`mst.cli.main`, the
graders and experiments groups in :mod:`mst.cli.graders` and ``mst gate`` / ``mst plan`` in
:mod:`mst.cli.stats` (each imported only when one is used); options several commands share are
in :mod:`mst.cli.options`. The command's process compiles the methods of its dataclasses once,
not at every start (:mod:`mst.cli.codecache`): installed first, before any is made.
"""

from mst.cli import codecache

codecache.install()

from mst.cli.main import main  # noqa: E402

__all__ = ["main"]
