"""pydantic's plugin lookup, without importlib.metadata when no installed distribution declares a plugin.

pydantic finds its plugins (entry-point group ``pydantic``) the first time it builds a validator,
through ``pydantic.plugin._loader``, which imports :mod:`importlib.metadata` (with email, zipfile,
csv) and parses every distribution's entry points: ~10% of a 1-case `mst run`'s instructions,
for a lookup that finds nothing in most installs (bench/perf16_startup.md, Session 7).
:func:`install` puts a stand-in for that module in ``sys.modules``: its ``get_plugins`` lists the
``entry_points.txt`` files of the distributions importlib.metadata would find and, only if one of
them mentions ``pydantic``, hands over to pydantic's own loader, so a user's plugins load as
before (and ``PYDANTIC_DISABLE_PLUGINS`` is honoured by it). Anything the scan cannot read the
way importlib.metadata would (a zip or egg on ``sys.path``, another distribution finder) also
hands over. Imports nothing from mst or pydantic.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from importlib import import_module
from importlib.machinery import PathFinder
from typing import Any

LOADER = "pydantic.plugin._loader"
_INFO_SUFFIXES = (".dist-info", ".egg-info")


def install() -> None:
    """Stand in for pydantic's plugin loader unless it has been imported already."""
    if LOADER in sys.modules:
        return
    stand_in = types.ModuleType(LOADER, __doc__)
    stand_in.__dict__.update(get_plugins=get_plugins, __getattr__=_real_attribute)
    sys.modules[LOADER] = stand_in


def get_plugins() -> Iterable[Any]:
    """pydantic's ``get_plugins``: none when no distribution can declare one, else pydantic's answer."""
    if not _may_declare_plugins():
        return ()
    return _real_loader().get_plugins()  # type: ignore[no-any-return]


def _real_attribute(name: str) -> Any:
    """Any other name of the loader module (``_plugins``, ...) is read from pydantic's own; the
    import system's probes (``__path__``, ...) are not names of it."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real_loader(), name)


def _real_loader() -> types.ModuleType:
    """pydantic's loader module, imported in place of the stand-in (which is then gone for good)."""
    module = sys.modules.get(LOADER)
    if module is not None and module.__dict__.get("get_plugins") is not get_plugins:
        return module
    sys.modules.pop(LOADER, None)
    return import_module(LOADER)


_answer: bool | None = None


def _may_declare_plugins() -> bool:
    """Whether an installed distribution may declare a pydantic plugin (scanned once, as pydantic caches)."""
    global _answer
    if _answer is None:
        _answer = _other_finders() or any(_entry_may_declare(entry) for entry in list(sys.path))
    return _answer


def _other_finders() -> bool:
    """A finder other than the path finder may list distributions the scan below does not see."""
    return any(finder is not PathFinder and hasattr(finder, "find_distributions") for finder in sys.meta_path)


def _entry_may_declare(entry: object) -> bool:
    """One ``sys.path`` entry, read as importlib.metadata's path finder reads it ('' is the current
    directory; a missing directory has no distributions)."""
    if not isinstance(entry, str):
        return True
    root = entry or "."
    if root.lower().endswith(".egg"):
        return True
    try:
        names = os.listdir(root)
    except NotADirectoryError:
        return True  # a zip file: importlib.metadata reads its listing
    except OSError:
        return False
    return any(_info_may_declare(os.path.join(root, name)) for name in names if name.lower().endswith(_INFO_SUFFIXES))


def _info_may_declare(info: str) -> bool:
    """A ``*.dist-info`` / ``*.egg-info`` whose ``entry_points.txt`` mentions pydantic at all."""
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
            return "pydantic" in f.read().lower()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
