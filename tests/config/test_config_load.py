"""Eval loading: datasets, secrets, and where errors point."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import basic_eval, write_eval

from mst.config.datasets import load_dataset
from mst.config.errors import UserError
from mst.config.resolve import resolve_eval
from mst.config.secrets import load_secrets


def test_cases_from_jsonl_csv_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "j1", "prompt": "p", "expected": 1}\n\n')
    (tmp_path / "b.csv").write_text("id,prompt,expected,topic\nc1,hello,world,greetings\n")
    (tmp_path / "c.yaml").write_text("cases:\n  - id: y1\n    prompt: p\n    trials: 3\n")
    doc = basic_eval(cases=[], datasets=[{"path": "a.jsonl"}, {"path": "b.csv"}, {"path": "c.yaml"}])
    resolved = resolve_eval(write_eval(tmp_path, doc))
    by_id = {c.id: c for c in resolved.cases}
    assert set(by_id) == {"j1", "c1", "y1"}
    assert by_id["c1"].metadata == {"topic": "greetings"} and by_id["c1"].expected == "world"
    assert by_id["y1"].trials == 3 and by_id["j1"].trials == 2
    assert all(c.assertions for c in resolved.cases)  # eval-level assertions applied to every case


def test_dataset_case_error_names_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "ok", "prompt": "p"}\n{"id": "bad", "promt": "p"}\n')
    with pytest.raises(UserError) as info:
        resolve_eval(write_eval(tmp_path, basic_eval(datasets=[{"path": "a.jsonl"}])))
    text = str(info.value)
    assert "a.jsonl:2" in text and "promt" in text


def test_unknown_dataset_format(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown dataset format 'parquet'"):
        list(load_dataset(tmp_path / "x.parquet", None, {}))


def test_secrets_file_parsing_and_errors_without_values(tmp_path: Path) -> None:
    f = tmp_path / "s.env"
    f.write_text("# comment\nexport A=1234\nB='quoted value'\nC=\"x y\"  \n\n")
    assert load_secrets(f) == {"A": "1234", "B": "quoted value", "C": "x y"}
    f.write_text("A=1\nthis line holds sk-secret-value\n")
    with pytest.raises(UserError) as info:
        load_secrets(f)
    assert f"{f}:2" in str(info.value) and "sk-secret-value" not in str(info.value)


def test_eval_without_cases_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="give cases inline"):
        resolve_eval(write_eval(tmp_path, basic_eval(cases=[])))


def test_judge_identity_is_shared_across_cases(tmp_path: Path) -> None:
    (tmp_path / "j.py").write_text("def ok(trial):\n    return True\n")
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(judges=[{"id": "ok", "code": "j:ok"}])))
    identities = {c.judges[0].identity for c in resolved.cases}
    assert len(identities) == 1 and next(iter(identities)).startswith("sha256:")
