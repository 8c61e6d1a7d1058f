"""The command's cache of the code dataclasses, named tuples and annotations compile (mst.cli.codecache)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from collections import namedtuple
from pathlib import Path

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
