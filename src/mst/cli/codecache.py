"""Compiled code for the source text the standard library writes at import, kept like a ``.pyc``.

Python 3.11 builds each method of a dataclass (``__init__``, ``__repr__``, ``__eq__``, a frozen
one's ``__setattr__`` …) by ``exec``-ing source text it writes from the fields, a named tuple's
``__new__`` by ``eval``, and each string annotation's :class:`typing.ForwardRef` by ``compile``.
A 1-case `mst run` did ~600 such ``exec`` calls, ~40 ``eval`` and ~830 ``compile``: a quarter of
its instructions were the parser and compiler (bench/perf16_startup.md, session 10). The text
depends only on the class (or annotation) it is made for, so its code is the same in every
process, as a module's bytecode is. The ``mst`` command's process keeps the compiled code of
each text in files beside mst's own ``.pyc`` files (one per module the code is made for, in
``__pycache__``, under ``sys.pycache_prefix`` if set; none written when
``sys.dont_write_bytecode`` is, as Python writes no ``.pyc`` then) and compiles only text it has
not seen.

The same goes for regular expressions: ``re.compile`` parses a pattern and works out its
matching program in Python (a 1-case `mst run` compiled ~60 at import, ~12 ms of its ~170 ms:
PyYAML's reader alone takes 4 ms for one character class; bench/README.md, session 14). The
program depends only on the pattern and its flags, so the cache keeps it too (group ``re``) and
hands it to ``_sre.compile`` as ``re`` would; :func:`install` first checks, on a pattern of
groups and alternatives, that this gives the very pattern ``re`` makes, and leaves ``re`` alone
when it does not (another Python's internals). Only the patterns that imports compile are kept:
those before the command starts (:func:`seal`) and those of the engine's import (:func:`importing`)
are the modules' own, while a pattern the command's work makes may hold what it reads (the
redactor compiles the run's secret values into one), which must never reach a file.

Nothing else changes: the code is what ``compile`` makes of the same text with the same flags
(``dataclasses``, ``collections`` and ``typing`` use no ``__future__`` imports, so the code they
would have compiled inherits none), run with the same globals and locals, so the classes and
functions are the ones Python would have made. Each file is a cache: one that is missing, of
another Python, or unreadable is ignored, and a process writes one only when it compiled
something new for it (replaced whole, so concurrent writers never leave a torn file).
"""

from __future__ import annotations

import atexit
import builtins
import collections
import contextlib
import dataclasses
import marshal
import os
import re
import sys
import typing
from collections.abc import Callable, Iterator
from importlib.util import MAGIC_NUMBER, cache_from_source
from pathlib import Path
from types import CodeType
from typing import Any

_Key = tuple[Any, ...]  # (mode, filename, source) of code; ("re", sre magic, flags, pattern) of a regex

# A group's file that outgrows this keeps only what the process that writes it used.
MAX_ENTRIES = 2048

_groups: dict[str, dict[_Key, Any]] = {}  # a file each, read on first use: code, or a regex's program
_used: set[_Key] = set()
_changed: set[str] = set()  # groups this process compiled text for (the file did not have it)
_dir: Path | None = None
_keeping_regexes = True  # whether a regex compiled now is kept (see seal and importing)


def cache_dir() -> Path:
    """Where the cache lives: beside the ``.pyc`` Python would write for a module ``mst.cli._codecache``."""
    return Path(cache_from_source(str(Path(__file__).with_name("_codecache.py")))).with_suffix("")


def install(directory: Path | None = None) -> None:
    """Route ``dataclasses``' ``exec``, ``collections``' ``eval`` and ``typing``'s ``compile``
    through the cache (files in ``directory``, default :func:`cache_dir`) and save it at exit.

    Once per process; a module that already names its own function there is left alone.
    """
    global _dir
    if _dir is not None:
        return
    try:
        _dir = directory or cache_dir()
    except NotImplementedError:  # no sys.implementation.cache_tag: Python keeps no bytecode either
        return
    shims = ((dataclasses, "exec", _exec), (collections, "eval", _eval), (typing, "compile", _compile))
    for module, name, shim in shims:
        if name not in vars(module):
            setattr(module, name, shim)
    if _regex_shim_fits():
        _re_compiler.compile = _regex
    atexit.register(save)


def code_for(source: str, mode: str, group: str, filename: str = "<string>") -> CodeType:
    """``compile(source, filename, mode)`` with no inherited flags, from the cache when it has it.

    ``group`` names the file the code is kept in (a dataclass's module; ``collections``' named
    tuples; ``typing``'s annotations), so a command reads the code of the modules it imports only.
    """
    code: CodeType = _cached(group, (mode, filename, source),
                             lambda: builtins.compile(source, filename, mode, dont_inherit=True))
    return code


def _cached(group: str, key: _Key, make: Callable[[], Any]) -> Any:
    """The value kept for ``key`` in ``group``'s file, made (and the group marked for saving)
    when the file has none: compiled code and regex programs alike."""
    values = _groups.get(group)
    if values is None:
        values = _groups[group] = _load(group)
    value = values.get(key)
    if value is None:
        value = values[key] = make()
        _changed.add(group)
    _used.add(key)
    return value


_Program = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]  # what _sre.compile takes


def _regex_program(pattern: str | bytes, flags: int) -> _Program:
    """What ``_sre.compile`` takes after ``pattern`` (flags, program, groups, their names both
    ways), as ``re``'s own compiler works it out, from the cache when it has it (group ``re``)."""
    program: _Program = _cached("re", ("re", _re_compiler.MAGIC, int(flags), pattern),
                                lambda: _program(pattern, flags))
    return program


def seal() -> None:
    """Keep no regular expression compiled from now on (but in :func:`importing`): the command
    starts its work, whose patterns may be built from data (the redactor's, of secret values)."""
    global _keeping_regexes
    _keeping_regexes = False


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """Keep the regular expressions compiled inside (a command's import of the engine: modules only)."""
    global _keeping_regexes
    was, _keeping_regexes = _keeping_regexes, True
    try:
        yield
    finally:
        _keeping_regexes = was


def compiled_groups() -> set[str]:
    """The groups this process compiled text for itself (the cache did not have it)."""
    return set(_changed)


def save() -> None:
    """Write each group this process compiled new text for (at exit; an error is ignored)."""
    if _dir is None or sys.dont_write_bytecode:
        return
    for group in _changed:
        codes = _groups[group]
        if len(codes) > MAX_ENTRIES:
            codes = {k: v for k, v in codes.items() if k in _used}
        path = _group_file(group)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(MAGIC_NUMBER + marshal.dumps(codes))
            os.replace(tmp, path)
        except OSError:  # a read-only install, a full disk: the next start compiles again
            _discard(tmp)


def _discard(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass


def _group_file(group: str) -> Path:
    assert _dir is not None
    return _dir / f"{group if group.replace('.', '').replace('_', '').isalnum() else '_other'}.marshal"


def _load(group: str) -> dict[_Key, Any]:
    try:
        data = _group_file(group).read_bytes()
    except OSError:
        return {}
    if not data.startswith(MAGIC_NUMBER):
        return {}
    try:
        codes = marshal.loads(data[len(MAGIC_NUMBER):])
    except (EOFError, ValueError, TypeError):
        return {}
    return codes if isinstance(codes, dict) else {}


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:
    globals, locals = _namespaces(globals, locals)
    if isinstance(source, str):
        source = code_for(source, "exec", globals.get("__name__") or "_other")
    builtins.exec(source, globals, locals)


def _eval(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> Any:
    globals, locals = _namespaces(globals, locals)
    if isinstance(source, str):
        source = code_for(source, "eval", "collections")
    return builtins.eval(source, globals, locals)


def _namespaces(globals: dict[str, Any] | None, locals: Any) -> tuple[dict[str, Any], Any]:
    """exec's and eval's default namespaces: their caller's (two frames up), not this module's."""
    if globals is not None:
        return globals, locals
    frame = sys._getframe(2)
    return frame.f_globals, frame.f_locals if locals is None else locals


# ``re``'s compiler (Python 3.11's layout), whose ``compile`` the cache stands in for.
_re_compiler: Any = getattr(re, "_compiler", None)
_re_compile: Any = getattr(_re_compiler, "compile", None)


def _regex(pattern: Any, flags: int = 0) -> Any:
    """``re._compiler.compile``: a pattern's program from the cache; a parsed pattern, a debug
    compile (which prints the program) and a pattern the command's work makes (see :func:`seal`)
    as ``re`` does them."""
    if not _keeping_regexes or not isinstance(pattern, str | bytes) or flags & re.DEBUG:
        return _re_compile(pattern, flags)
    return _re_compiler._sre.compile(pattern, *_regex_program(pattern, flags))


def _regex_shim_fits() -> bool:
    """Whether this Python's ``re`` has the compiler the shim reproduces, and the shim makes the
    same pattern ``re`` makes (equal patterns have equal flags, text and program)."""
    if _re_compile is None or not all(hasattr(_re_compiler, n) for n in ("_parser", "_code", "_sre", "MAGIC")):
        return False
    probe, flags = r"(?P<name>a|b)(c)?\1[^\x00-\x1f]", re.IGNORECASE
    try:
        made = _re_compiler._sre.compile(probe, *_program(probe, flags))
        return bool(made == _re_compile(probe, flags) and made.groupindex == {"name": 1})
    except Exception:  # another layout of re's internals: re is left as it is
        return False


def _program(pattern: str | bytes, flags: int) -> _Program:
    """What ``re._compiler.compile`` hands ``_sre.compile`` after the pattern (its own steps)."""
    parsed = _re_compiler._parser.parse(pattern, flags)
    state = parsed.state
    index: list[str | None] = [None] * state.groups
    for name, number in state.groupdict.items():
        index[number] = name
    # Plain ints: flags may be a RegexFlag and the program's opcodes int subclasses, which marshal refuses.
    return (int(flags | state.flags), list(map(int, _re_compiler._code(parsed, flags))), state.groups - 1,
            dict(state.groupdict), tuple(index))


def _compile(source: Any, filename: str, mode: str, flags: int = 0, dont_inherit: bool = False,
             optimize: int = -1) -> Any:
    if isinstance(source, str) and flags == 0 and optimize == -1:
        return code_for(source, mode, "typing", filename)
    return builtins.compile(source, filename, mode, flags, True, optimize)  # as from typing: nothing to inherit
