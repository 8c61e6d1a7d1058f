"""Each client gets only the secrets its variant names, judges only theirs — locally and in shards."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import basic_eval, load, only_run, run_cli, write_eval

NAMES = ("A_KEY", "B_KEY", "M_KEY", "JUDGE_KEY")
SECRETS = "".join(f"{name}=value-of-{name.lower()}-123\n" for name in NAMES)
SEEN = f"import os; print(' '.join(n for n in {NAMES!r} if n in os.environ) or 'none')"
JUDGE = f'''
import os

def sees(trial):
    return True, " ".join(n for n in {NAMES!r} if n in os.environ) or "none"
'''


def _variant(vid: str, **extra: object) -> dict[str, object]:
    return {"id": vid, "client": "command", "settings": {"command": ["python3", "-c", SEEN]}, **extra}


def _eval(tmp: Path, **overrides: object) -> Path:
    (tmp / "secrets.env").write_text(SECRETS)
    (tmp / "scope_judge.py").write_text(JUDGE)
    doc = basic_eval(
        trials=1, assertions=[],
        variants=[_variant("a", secrets=["A_KEY"]),
                  _variant("b", secrets=["B_KEY"], mcpServers={"s": {"command": "srv", "env": {"T": "${M_KEY}"}}}),
                  _variant("none")],
        judges=[{"id": "sees", "code": "scope_judge:sees", "secrets": ["JUDGE_KEY"]}])
    doc.update(overrides)
    return write_eval(tmp, doc)


def _seen(run: Path) -> tuple[dict[str, str], set[str]]:
    clients = {a["variant"]: a["answer"] for a in load(run / "run.json")["attempts"]}
    judges = {v["reason"] for t in load(run / "results.json")["trials"] for v in t["verdicts"] if v["judge"] == "sees"}
    return clients, judges


@pytest.mark.parametrize("runner", [[], ["--runner", "process", "--runner-option", "shards=2"]],
                         ids=["local", "shards"])
def test_clients_and_judges_get_only_the_secrets_they_name(tmp_path: Path, runner: list[str]) -> None:
    path = _eval(tmp_path)
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--secrets-file", "secrets.env", *runner, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run(tmp_path / "runs")
    clients, judges = _seen(run)
    assert clients == {"a": "A_KEY", "b": "B_KEY M_KEY", "none": "none"}
    assert judges == {"JUDGE_KEY"}
    if runner:  # grade shards too: the judges' environment holds their key only
        proc = run_cli("grade", str(run), "--secrets-file", "secrets.env", *runner, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        regrade = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != run)
        assert _seen(regrade)[1] == {"JUDGE_KEY"}


def test_a_named_secret_missing_from_the_file_stops_the_run_first(tmp_path: Path) -> None:
    path = _eval(tmp_path)
    (tmp_path / "short.env").write_text("A_KEY=x1234\n")
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--secrets-file", "short.env", cwd=tmp_path)
    assert proc.returncode == 2
    assert (f"error: {path}: variants[1] (b) needs the secret B_KEY, but the secrets file short.env does not "
            "define it") in proc.stderr
    assert f"error: {path}: judges needs the secret JUDGE_KEY" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2
    assert "variants[0] (a) needs the secret A_KEY, but no --secrets-file was given" in proc.stderr
