"""Hostile eval files and datasets: each ends in a clear error naming the file (and line), never a
traceback, a hang or gigabytes of memory."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from tests.helpers import basic_eval, write_eval

from mst.cli import main
from mst.config import yamlfile
from mst.config.errors import UserError
from mst.config.load import load_eval
from mst.config.resolve import resolve_eval

LOADERS = [pytest.param(yamlfile.PyLoader, id="python")]
if hasattr(yamlfile, "CLoader"):
    LOADERS.append(pytest.param(yamlfile.CLoader, id="libyaml"))

BASE = "name: x\nvariants:\n  - id: a\n    model: mock\ncases:\n  - id: c\n    prompt: p\n"


def _error(path: Path) -> str:
    with pytest.raises(UserError) as info:
        resolve_eval(path)
    text = str(info.value)
    assert all(p.file for p in info.value.problems), text
    return text


def _eval(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eval.yaml"
    path.write_text(text)
    return path


def _parse_error(text: str, loader: type[Any]) -> str:
    with pytest.raises(UserError) as info:
        yamlfile.parse_yaml(text.encode(), "f.yaml", loader)
    return str(info.value)


# --- nesting ----------------------------------------------------------------------------------


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("depth", [150, 1_000, 100_000])
def test_deep_nesting_is_refused_with_its_line(loader: type[Any], depth: int) -> None:
    text = BASE + "metrics: " + "[" * depth + "]" * depth + "\n"
    message = _parse_error(text, loader)
    assert message.startswith("f.yaml:8: ") and "nest" in message


@pytest.mark.parametrize("loader", LOADERS)
def test_nesting_through_aliases_counts(loader: type[Any]) -> None:
    deep = "[" * 60 + "]" * 60
    text = f"a: &a {deep}\nb: " + "[" * 50 + "*a" + "]" * 50 + "\n"  # 110 levels, 60 of them via *a
    assert "nested too deeply" in _parse_error(text, loader)


@pytest.mark.parametrize("loader", LOADERS)
def test_nesting_within_the_bound_loads(loader: type[Any]) -> None:
    data, node = yamlfile.parse_yaml(("a: " + "[" * 90 + "1" + "]" * 90).encode(), "f.yaml", loader)
    value = data["a"]
    for _ in range(90):
        value = value[0]
    assert value == 1 and node is not None


def test_deep_eval_file_is_exit_2_on_the_cli(tmp_path: Path) -> None:
    path = _eval(tmp_path, BASE + "metrics: " + "[" * 1000 + "]" * 1000 + "\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path}:8" in result.output


def test_deep_jsonl_case_is_refused_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "a", "prompt": "p"}\n{"id": "d", "prompt": "p", "expected": '
                                      + "[" * 300 + "]" * 300 + "}\n")
    text = _error(write_eval(tmp_path, basic_eval(datasets=[{"path": "d.jsonl"}])))
    assert "d.jsonl:2" in text and "nested too deeply" in text


# --- tags and values a run cannot store -------------------------------------------------------


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(("value", "tag"), [
    ("!!int abc", "int"), ("!!float abc", "float"), ("!!bool maybe", "bool"), ("!!timestamp 1", "timestamp"),
    ("2024-13-45", "timestamp"), ("1" * 5000, "int"), ("!!int 0b", "int"),
])
def test_bad_tagged_values_name_the_line(loader: type[Any], value: str, tag: str) -> None:
    message = _parse_error(BASE + f"description: {value}\n", loader)
    assert message.startswith("f.yaml:8: ") and f"not a valid !!{tag} value" in message


@pytest.mark.parametrize(("snippet", "field", "words"), [
    ("seed: 18446744073709551616\n", "seed", "64 bits"),
    ("seed: -9223372036854775809\n", "seed", "64 bits"),
    ("cases:\n  - id: c\n    prompt: p\n    expected: 123456789012345678901234567890\n",
     "cases[0].expected", "64 bits"),
    ("cases:\n  - id: c\n    prompt: p\n    expected: !!binary aGVsbG8=\n", "cases[0].expected", "!!binary"),
    ("cases:\n  - id: c\n    prompt: p\n    expected: !!set {a}\n", "cases[0].expected", "!!set"),
    ("cases:\n  - id: c\n    prompt: p\n    expected: {1: a}\n", "cases[0].expected", "not a string"),
    ("cases:\n  - id: c\n    prompt: p\n    expected: !!omap [a: 18446744073709551616]\n",
     "cases[0].expected[0][1]", "64 bits"),
])
def test_values_a_run_cannot_store_are_refused(tmp_path: Path, snippet: str, field: str, words: str) -> None:
    head = "name: x\nvariants:\n  - id: a\n    model: mock\n"
    text = head + snippet if snippet.startswith("cases") else BASE + snippet
    path = _eval(tmp_path, text)
    message = _error(path)
    line = len(text.splitlines())
    assert f"{path}:{line}: {field}: " in message and words in message


def test_a_seed_of_64_bits_still_loads(tmp_path: Path) -> None:
    assert load_eval(_eval(tmp_path, BASE + "seed: 9223372036854775807\n")).config.seed == 2**63 - 1


def test_run_with_a_huge_seed_stops_before_creating_anything(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval(seed=2**64))
    result = CliRunner().invoke(main, ["run", str(path), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "seed" in result.output and "64 bits" in result.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    assert "alias *a" in _error(_eval(tmp_path, BASE + "description: &a [*a]\n"))


# --- alias bombs ------------------------------------------------------------------------------

_BOMB = ["a0: &a0 [lol]"] + [f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, 10)]


def _bomb(indent: int) -> str:
    return "\n".join(" " * indent + line for line in _BOMB) + "\n"


@pytest.mark.parametrize("where", ["judges", "pairwise", "graders"])
def test_alias_bomb_is_refused_while_composing(tmp_path: Path, where: str) -> None:
    (tmp_path / "j.py").write_text("def f(*args):\n    return True\n")
    text = BASE.replace("model: mock", "model: mock\n    baseline: true")
    text += {
        "judges": "judges:\n  - id: j\n    code: j:f\n    options:\n" + _bomb(6),
        "pairwise": "pairwise:\n  code: j:f\n  options:\n" + _bomb(4),
        "graders": "graders:\n  loops:\n    config:\n" + _bomb(6),
    }[where]
    path = _eval(tmp_path, text)
    tracemalloc.start()
    started = time.monotonic()
    try:
        message = _error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5
    assert peak < 20_000_000, peak
    assert "alias bomb" in message and f"{path}:" in message


def test_modest_alias_use_loads(tmp_path: Path) -> None:
    text = BASE + "description: &d shared\nmetrics: []\nredact: [*d, *d]\n"
    assert load_eval(_eval(tmp_path, text)).config.redact == ["shared", "shared"]


# --- files -----------------------------------------------------------------------------------


def test_control_character_names_file_and_line(tmp_path: Path) -> None:
    path = _eval(tmp_path, BASE + "description: a\x01b\n")
    message = _error(path)
    assert f"{path}:8: " in message and "<unicode string>" not in message and "#x0001" in message


def test_symlink_loop_as_eval_path(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    os.symlink(loop, loop)
    assert str(loop) in _error(loop)


def test_second_document_is_refused(tmp_path: Path) -> None:
    path = _eval(tmp_path, BASE + "---\nname: y\n")
    assert f"{path}:8: " in _error(path)


@pytest.mark.parametrize("name", ["cases.csv", "cases.yaml"])
def test_non_utf8_dataset_names_file_and_line(tmp_path: Path, name: str) -> None:
    body = "id,prompt\nc9,caf\xe9\n" if name.endswith("csv") else "- id: c9\n  prompt: caf\xe9\n"
    (tmp_path / name).write_bytes(body.encode("latin-1"))
    message = _error(write_eval(tmp_path, basic_eval(datasets=[{"path": name}])))
    assert f"{tmp_path / name}:2: not UTF-8" in message


@pytest.mark.parametrize("delimiter", ["ab", "", '"', "\n", 5])
def test_bad_csv_delimiter(tmp_path: Path, delimiter: Any) -> None:
    (tmp_path / "c.csv").write_text("id,prompt\nc9,p\n")
    doc = basic_eval(datasets=[{"path": "c.csv", "options": {"delimiter": delimiter}}])
    message = _error(write_eval(tmp_path, doc))
    assert str(tmp_path / "c.csv") in message and "delimiter" in message


def test_carriage_returns_in_csv(tmp_path: Path) -> None:
    """CR line endings and a CR inside a quoted field are read; a bare CR ends a row."""
    (tmp_path / "c.csv").write_bytes(b'id,prompt\rq1,"two\rlines"\rq2,plain\r')
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(cases=[], datasets=[{"path": "c.csv"}])))
    assert [(c.id, c.prompt) for c in resolved.cases] == [("q1", "two\rlines"), ("q2", "plain")]
    (tmp_path / "c.csv").write_bytes(b"id,prompt\nq1,bare\rcr\n")
    assert f"{tmp_path / 'c.csv'}:" in _error(write_eval(tmp_path, basic_eval(datasets=[{"path": "c.csv"}])))


def test_csv_field_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text('id,prompt\nq1,"' + "x" * 200_000 + '"\n')
    message = _error(write_eval(tmp_path, basic_eval(datasets=[{"path": "c.csv"}])))
    assert f"{tmp_path / 'c.csv'}:" in message and "malformed CSV" in message


@pytest.mark.parametrize(("dataset", "needles"), [
    ({"path": "cases.txt"}, ["cases.txt", "unknown dataset format 'txt'", "format"]),
    ({"path": "sub"}, ["sub: is a directory"]),
    ({"format": "jsonl"}, ["eval.yaml: datasets[0].path: ", "needs a 'path'"]),
    ({"format": "parquet"}, ["eval.yaml: datasets[0].format: ", "unknown dataset format 'parquet'"]),
])
def test_dataset_errors_name_a_file(tmp_path: Path, dataset: dict[str, Any], needles: list[str]) -> None:
    (tmp_path / "cases.txt").write_text("x\n")
    (tmp_path / "sub").mkdir()
    message = _error(write_eval(tmp_path, basic_eval(datasets=[dataset])))
    for needle in needles:
        assert needle in message, (needle, message)


# --- size: parse once, linear errors ----------------------------------------------------------


def test_eval_file_is_parsed_once_without_pyyaml_composer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass (events composed here), not yaml.compose then yaml.safe_load of the same text."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parsed a second time")

    for name in ("compose", "safe_load", "load"):
        monkeypatch.setattr(yaml, name, refuse)
    (tmp_path / "c.yaml").write_text("- id: y1\n  prompt: p\n")
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(datasets=[{"path": "c.yaml"}])))
    assert {c.id for c in resolved.cases} == {"c1", "c2", "y1"}
    if yaml.__with_libyaml__:
        assert yamlfile._Loader is yamlfile.CLoader


def _many_unknown_keys(tmp_path: Path, n: int) -> Path:
    return _eval(tmp_path, BASE + "".join(f"k{i}: {i}\n" for i in range(n)))


def test_many_unknown_keys_each_named_with_their_line(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        load_eval(_many_unknown_keys(tmp_path, 2_000))
    problems = info.value.problems
    assert len(problems) == 2_000
    assert problems[-1].path == "k1999" and problems[-1].line == 8 + 1999


@pytest.mark.slow
def test_twenty_thousand_unknown_keys_are_fast(tmp_path: Path) -> None:
    path = _many_unknown_keys(tmp_path, 20_000)
    started = time.monotonic()
    with pytest.raises(UserError):
        load_eval(path)
    assert time.monotonic() - started < 10  # quadratic: over 20 s (47 s on a loaded machine)


@pytest.mark.slow
def test_twenty_thousand_inline_cases_are_fast_and_keep_lines(tmp_path: Path) -> None:
    cases = "".join(f"  - id: c{i}\n    prompt: hello {i}\n    expected: world {i}\n" for i in range(20_000))
    path = _eval(tmp_path, BASE.replace("cases:\n  - id: c\n    prompt: p\n", "cases:\n") + cases)
    started = time.monotonic()
    resolved = resolve_eval(path)
    assert time.monotonic() - started < 15  # twice with the pure-Python loader: 24-31 s
    assert len(resolved.cases) == 20_000
    bad = path.read_text().replace("id: c19999\n", "id: c19999\n    trials: zero\n")
    path.write_text(bad)
    with pytest.raises(UserError) as info:
        load_eval(path)
    assert info.value.problems[0].line == 6 + 3 * 19_999 + 1  # the line after the case's id


@pytest.mark.parametrize(("snippet", "field"), [
    ('runsDir: "runs\\0x"\n', "runsDir"),
    ('variants:\n  - id: a\n    model: mock\n    mcpServers:\n      s: {command: "py\\0thon"}\n',
     "variants[0].mcpServers.s.command"),
    ('variants:\n  - id: a\n    model: mock\n    mcpServers:\n      s: {command: python, args: ["a\\0"]}\n',
     "variants[0].mcpServers.s.args[0]"),
])
def test_nul_in_text_for_the_os_is_refused(tmp_path: Path, snippet: str, field: str) -> None:
    text = ("name: x\ncases:\n  - id: c\n    prompt: p\n" + snippet) if snippet.startswith("variants") \
        else BASE + snippet
    message = _error(_eval(tmp_path, text))
    assert f"{field}: must not contain a NUL" in message


def test_graders_config_alias_bomb_on_the_cli(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_text('{"type": "user.message", "data": {}, "provenance": {}}\n')
    (tmp_path / "g.yaml").write_text("loops:\n  config:\n" + _bomb(4))
    args = ["graders", "run", str(tmp_path / "s.jsonl"), "--config", str(tmp_path / "g.yaml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "alias bomb" in result.output and "g.yaml" in result.output


def test_dataset_name_too_long(tmp_path: Path) -> None:
    name = "c" * 5000 + ".jsonl"
    assert "cannot read the dataset file" in _error(write_eval(tmp_path, basic_eval(datasets=[{"path": name}])))


@pytest.mark.parametrize("loader", LOADERS)
def test_composer_matches_pyyaml_on_real_evals(tmp_path: Path, loader: type[Any]) -> None:
    """The same data as yaml.safe_load, and the same tree (tags, lines), for the example eval and
    a file using merge keys, anchors, tags and flow style."""
    extra = (b"defaults: &d {maxTurns: 3, mock: {seed: 1}}\nvariants:\n  - id: a\n    settings:\n      <<: *d\n"
             b"      extra: !!str 12\n  - {id: b, settings: *d}\nwhen: 2024-01-02\nset: !!set {a, b}\n"
             b"pairs: !!omap [{a: 1}, {b: 2}]\nnum: [0x1f, 1_000, .inf, -.5e3, ~, yes, 'no']\n")
    with pytest.raises(UserError, match="!!set"):  # a set has no JSON form: refused
        yamlfile.parse_yaml(extra, "f.yaml", loader)
    quickstart = (Path(__file__).parents[2] / "examples" / "quickstart" / "eval.yaml").read_bytes()
    for raw in (quickstart, extra.replace(b"set: !!set {a, b}\n", b"")):
        data, node = yamlfile.parse_yaml(raw, "f.yaml", loader)
        assert data == yaml.safe_load(raw)
        pyyaml = yaml.SafeLoader(raw)
        expected = pyyaml.get_single_node()
        pyyaml.construct_document(expected)  # construction flattens merge keys into the tree
        lines = [(n.tag, n.start_mark.line) for n in _walk(node)]
        assert lines == [(n.tag, n.start_mark.line) for n in _walk(expected)]


def _walk(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
        elif isinstance(n, yaml.MappingNode):
            stack.extend(x for pair in reversed(n.value) for x in reversed(pair))
    return out
