"""The ``mst`` command line: parse arguments, call the library, print. Nothing imports this package.

``mst.cli:main`` is the console entry point; the commands live in :mod:`mst.cli.main` and the
graders and experiments groups in :mod:`mst.cli.graders`, imported only when one is used.
"""

from mst.cli.main import main

__all__ = ["main"]
