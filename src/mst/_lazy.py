"""Lazy package exports: a package names its public API without importing it.

``import mst`` (and so ``mst --help``) must stay instant, and a package's ``__init__`` must not
pull in every module of the package (nor create an import cycle) just because one of them is
used. A package lists ``name → module`` and installs the two functions this returns as its
module-level ``__getattr__`` and ``__dir__`` (PEP 562); the first access imports the module and
caches the value in the package. The package also imports the same names under
``TYPE_CHECKING`` so type checkers see real types. Imports nothing from mst.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public ``name`` lives in ``table[name]``."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
