"""The command's cache of the code dataclasses, named tuples and annotations compile (mst.cli.codecache)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import typing
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from mst.cli import codecache


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache as a new process has it, in ``tmp_path``, with writing allowed."""
    monkeypatch.setattr(codecache, "_dir", tmp_path)
    monkeypatch.setattr(codecache, "_groups", {})
    monkeypatch.setattr(codecache, "_used", set())
    monkeypatch.setattr(codecache, "_changed", set())
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(codecache, "_keeping_regexes", True)  # as before a command starts its work
    return tmp_path


def _new_process(codes: Path) -> None:
    """What a new process finds: the files, nothing in memory."""
    codecache._groups.clear()
    codecache._used.clear()
    codecache._changed.clear()
    assert codecache._dir == codes


def _point() -> type:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: tuple[int, ...] = ()

    return Point


def test_the_command_routes_the_three_compilers_through_the_cache() -> None:
    import collections

    assert vars(dataclasses)["exec"] is codecache._exec
    assert vars(collections)["eval"] is codecache._eval
    assert vars(typing)["compile"] is codecache._compile


def test_a_second_process_compiles_nothing_it_has_seen(fresh: Path) -> None:
    _point()
    namedtuple("Pair", "a b")
    typing.ForwardRef("list[int] | None")
    assert codecache.compiled_groups() == {__name__, "collections", "typing"}
    codecache.save()
    assert sorted(p.name for p in fresh.iterdir()) == sorted(
        ["collections.marshal", "typing.marshal", f"{__name__}.marshal"])  # fmt: skip

    _new_process(fresh)
    point = _point()
    pair = namedtuple("Pair", "a b")
    ref = typing.ForwardRef("list[int] | None")
    assert codecache.compiled_groups() == set()
    assert point(1, (2,)) == point(1, (2,)) and hash(point(1)) == hash(point(1))
    assert repr(point(1)).endswith("Point(x=1, y=())")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point(1).x = 2  # type: ignore[misc]
    assert pair(1, 2) == (1, 2) and pair(1, 2).b == 2
    assert ref._evaluate(globals(), None, frozenset()) == (list[int] | None)  # type: ignore[call-arg]


def test_cached_code_is_the_code_python_would_compile(fresh: Path) -> None:
    cached = _point()
    codecache.save()
    _new_process(fresh)
    from_file = _point()
    del dataclasses.exec  # type: ignore[attr-defined]
    try:
        plain = _point()
    finally:
        dataclasses.exec = codecache._exec  # type: ignore[attr-defined]
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        code = getattr(plain, name).__code__
        assert getattr(cached, name).__code__ == code, name
        assert getattr(from_file, name).__code__ == code, name


def test_a_file_of_another_python_or_a_torn_one_is_ignored(fresh: Path) -> None:
    (fresh / f"{__name__}.marshal").write_bytes(b"\x00\x00\r\nnot code")
    _point()
    assert codecache.compiled_groups() == {__name__}
    from importlib.util import MAGIC_NUMBER

    (fresh / f"{__name__}.marshal").write_bytes(MAGIC_NUMBER + b"\xff")
    _new_process(fresh)
    _point()
    assert codecache.compiled_groups() == {__name__}


def test_nothing_is_written_when_python_writes_no_bytecode(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _point()
    codecache.save()
    assert list(fresh.iterdir()) == []


def test_an_unwritable_cache_is_no_error(fresh: Path) -> None:
    (fresh / "x").write_text("")
    codecache._dir = fresh / "x" / "under-a-file"
    _point()
    codecache.save()
    assert sorted(p.name for p in fresh.iterdir()) == ["x"]


def test_a_group_that_outgrows_the_bound_keeps_what_was_used(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        codecache.code_for(f"x = {i}", "exec", "g")
    codecache.save()
    _new_process(fresh)
    monkeypatch.setattr(codecache, "MAX_ENTRIES", 2)
    codecache.code_for("x = 0", "exec", "g")
    codecache.code_for("x = 9", "exec", "g")
    codecache.save()
    _new_process(fresh)
    assert {k[2] for k in codecache._load("g")} == {"x = 0", "x = 9"}


def test_the_mst_command_reads_the_code_a_first_one_wrote(tmp_path: Path) -> None:
    """Two `mst --version`-like starts that import the engine: the second compiles no method."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = ("import mst.cli, mst.api\nfrom mst.cli import codecache\n"
            "print(codecache.cache_dir().is_relative_to(sys.pycache_prefix), sorted(codecache.compiled_groups()))")
    runs = [subprocess.run([sys.executable, "-c", "import sys\n" + code], env=env, check=True, capture_output=True,
                           text=True).stdout.split(" ", 1) for _ in range(2)]  # fmt: skip
    assert runs[0][0] == "True" and "mst.collect" in runs[0][1] and "typing" in runs[0][1]
    assert runs[1] == ["True", "[]\n"]


_PATTERNS = [  # (pattern, flags): groups by name and number, classes, bytes, inline flags, a verbose one
    (r"(?P<year>\d{4})-(?P<month>\d\d)(?:-(\d\d))?", 0),
    ("[^\t\n\r -~\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", 0),  # PyYAML's reader: 4 ms to compile
    (rb"^[ \t\f]*(?:[#\r\n]|$)", 0),
    (r"(?i)caf\u00e9|(?P<x>a+)\1", re.MULTILINE),
    (r"""
        \s*(?P<key>[a-z_]+)   # a key
        \s*=\s*(?P<value>.*)  # its value
     """, re.VERBOSE | re.ASCII),
]


def _uncached(pattern: str | bytes, flags: int) -> re.Pattern[Any]:
    return codecache._re_compile(pattern, flags)  # type: ignore[no-any-return]


def test_the_command_routes_regular_expressions_through_the_cache() -> None:
    assert re._compiler.compile is codecache._regex  # type: ignore[attr-defined]


def test_a_cached_regex_is_the_pattern_re_would_make(fresh: Path) -> None:
    made = [codecache._regex(p, f) for p, f in _PATTERNS]
    assert codecache.compiled_groups() == {"re"}
    codecache.save()
    _new_process(fresh)
    again = [codecache._regex(p, f) for p, f in _PATTERNS]
    assert codecache.compiled_groups() == set()  # every program read from the file
    for (pattern, flags), first, second in zip(_PATTERNS, made, again, strict=True):
        plain = _uncached(pattern, flags)
        # Equal patterns: same text, flags and program (the program is what the cache keeps).
        assert first == plain and second == plain, pattern
        assert second.flags == plain.flags and second.groups == plain.groups
        assert dict(second.groupindex) == dict(plain.groupindex)
    year = again[0].match("2026-12-07")
    assert year is not None and year.group("month") == "12" and year.group(3) == "07"
    assert again[3].match("CAFÉ") is not None and again[3].match("aaaa").group("x") == "aa"  # type: ignore[union-attr]
    assert again[4].match(" name = mst").groupdict() == {"key": "name", "value": "mst"}  # type: ignore[union-attr]


def test_re_compile_itself_reads_the_cache(fresh: Path) -> None:
    pattern = r"mst-codecache-(\d+)-probe"  # a text no other test compiles: re's own cache has none
    assert re.compile(pattern).match("mst-codecache-42-probe").group(1) == "42"  # type: ignore[union-attr]
    assert "re" in codecache.compiled_groups()
    assert ("re", re._compiler.MAGIC, 0, pattern) in codecache._groups["re"]  # type: ignore[attr-defined]


def test_a_debug_compile_or_a_parsed_pattern_goes_to_re(fresh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codecache._regex("ab*", re.DEBUG)
    assert "LITERAL" in capsys.readouterr().out  # re printed the program, as it does for DEBUG
    parsed = re._parser.parse("a|bc", 0)  # type: ignore[attr-defined]  # what re.Scanner compiles
    made = codecache._regex(parsed, 0)
    assert made.pattern is None and made.match("bc") is not None  # re's own compile: no text to key on
    assert codecache.compiled_groups() == set()


def test_only_the_patterns_of_imports_are_kept(fresh: Path) -> None:
    codecache.seal()  # the command starts its work
    codecache._regex(r"sk-secret-value-\d+", 0)
    assert codecache.compiled_groups() == set()
    with codecache.importing():  # the engine's import, inside the command
        codecache._regex(r"module-level-(\w+)", 0)
    codecache._regex(r"after-the-import", 0)
    assert {k[3] for k in codecache._groups["re"]} == {r"module-level-(\w+)"}


def test_a_runs_secrets_never_reach_the_cache(tmp_path: Path) -> None:
    """The redactor compiles the secret values into a pattern: the command's cache files (a
    fresh ``PYTHONPYCACHEPREFIX``) hold the patterns of its imports and never that one."""
    from tests.helpers import basic_eval, run_cli, write_eval

    canary = "skCanaryRegex5d0e2b"  # nothing re.escape changes: the pattern would hold it as it is
    (tmp_path / "secrets.env").write_text(f"MY_KEY={canary}\n")
    variant = {"id": "cmd", "client": "command", "secrets": ["MY_KEY"],
               "settings": {"command": ["sh", "-c", 'echo "42 key=$MY_KEY"']}}
    path = write_eval(tmp_path, basic_eval(variants=[variant], assertions=[{"type": "contains", "value": "42"}],
                                           cases=[{"id": "c1", "prompt": "say 42", "expected": "42"}]))
    prefix = tmp_path / "pycache"
    env = {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": ""}
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--secrets-file", "secrets.env", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    kept = list(prefix.rglob("re.marshal"))
    assert kept, "the command kept no regex: this test would prove nothing"
    assert b"key=[REDACTED]" in next((tmp_path / "runs").rglob("run.json")).read_bytes()  # the redactor ran
    for file in prefix.rglob("*"):
        if file.is_file():
            assert canary.encode() not in file.read_bytes(), file


def test_the_regex_shim_stays_off_where_re_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert codecache._regex_shim_fits()
    monkeypatch.setattr(codecache._re_compiler, "_code", lambda p, flags: [0])  # another Python's program
    assert not codecache._regex_shim_fits()
    monkeypatch.setattr(codecache, "_re_compile", None)  # no re._compiler at all
    assert not codecache._regex_shim_fits()
