"""User errors, as the eval file's loader reports them. The one definition is :mod:`mst.errors`
(a leaf, so that file I/O below ``config`` can raise them too); this module names it for config."""

from mst.errors import Problem, UserError

__all__ = ["Problem", "UserError"]
