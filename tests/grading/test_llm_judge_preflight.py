"""The judge preflight for LLM judges: a missing key or a missing SDK stops the grading before any
verdict, naming the judge; the key a judge needs reaches grade workers without ``secrets:``
(docs/grading.md, "Preflight")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.clients_real.fake_provider import FakeProvider, serve, tool
from tests.helpers import basic_eval, load, mock_variant, run_cli, write_eval
from tests.runners.runners_helpers import collected_run, new_run

from mst.config.resolved import ResolvedJudge
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess
from mst.grading.llm_judge import keys, needs, spec

KEY = "sk-preflight-llm-0123456789"


@pytest.fixture(autouse=True)
def _no_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MST_LLM_AUTH_COMMAND"):
        monkeypatch.delenv(name, raising=False)


def _eval(tmp: Path, llm: dict[str, Any], *, pairwise: bool = False) -> Path:
    judge = {"id": "rubric", "llm": {"rubric": "Is the answer right?", **llm}}
    doc = basic_eval(trials=1, cases=[{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(3)],
                     variants=[mock_variant("base", baseline=True), mock_variant("cand")],
                     **({"pairwise": judge} if pairwise else {"judges": [judge]}))
    return write_eval(tmp, doc)


def _runs(run: Path) -> int:
    return len([p for p in run.parent.iterdir() if p.is_dir()])


@pytest.mark.parametrize("pairwise", [False, True], ids=["judge", "pairwise"])
def test_a_missing_key_stops_a_local_grade_before_any_verdict(tmp_path: Path, pairwise: bool) -> None:
    run = collected_run(tmp_path, _eval(tmp_path, {"model": "openai:gpt-4.1-mini"}, pairwise=pairwise))
    count = _runs(run)
    proc = run_cli("grade", str(run), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("judge preflight: judge 'rubric': the key OPENAI_API_KEY is not in the environment or the secrets "
            "file; add OPENAI_API_KEY=... to the environment or the secrets file") in " ".join(proc.stderr.split())
    assert _runs(run) == count  # no regrade was started, so no verdict was written


def test_a_missing_key_stops_a_run_before_collecting(tmp_path: Path) -> None:
    path = _eval(tmp_path, {"model": "anthropic:claude-haiku-4-5"})
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "judge 'rubric': the key ANTHROPIC_API_KEY is not in" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any(p.is_dir() for p in (tmp_path / "runs").iterdir())


def test_a_missing_sdk_stops_a_local_grade_before_any_verdict(tmp_path: Path) -> None:
    run = collected_run(tmp_path, _eval(tmp_path, {"model": "openai:gpt-4.1-mini"}))
    shadow = tmp_path / "no-sdk" / "openai"
    shadow.mkdir(parents=True)  # an `openai` that does not import shadows the installed SDK
    (shadow / "__init__.py").write_text("raise ImportError('this machine has no openai SDK')\n")
    (tmp_path / "keys.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    count = _runs(run)
    proc = run_cli("grade", str(run), "--secrets-file", "keys.env", cwd=tmp_path,
                   env={"PYTHONPATH": str(shadow.parent)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "judge preflight: judge 'rubric': the Python module 'openai' does not import" in said
    assert "install the package that provides 'openai' where it grades" in said
    assert _runs(run) == count
    assert KEY not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_shards_need_an_llm_judges_key_in_the_secrets_file(tmp_path: Path) -> None:
    run = collected_run(tmp_path, _eval(tmp_path, {"model": "openai:gpt-4.1-mini"}))
    count = _runs(run)
    proc = run_cli("grade", str(run), "--runner", "process", "--runner-option", "shards=2", cwd=tmp_path,
                   env={"OPENAI_API_KEY": "sk-ambient-only-5678"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("judge 'rubric': the key OPENAI_API_KEY is not in the secrets file; add OPENAI_API_KEY=... to the "
            "secrets file") in " ".join(proc.stderr.split())
    assert _runs(run) == count  # stopped before any shard started


@pytest.fixture()
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


@pytest.mark.slow
def test_the_key_a_judge_needs_reaches_the_workers_without_being_listed(tmp_path: Path, fake: FakeProvider) -> None:
    # A gateway that names its key: needed, so sent to the workers with no `secrets:` on the judge.
    fake.script("keyed", [tool("submit_verdict", {"passed": True, "reason": "right"})])
    llm = {"model": "openai:keyed", "baseUrl": fake.openai_url, "apiKeySecret": "GATEWAY_KEY", "retries": 0}
    run = collected_run(tmp_path, _eval(tmp_path, llm))
    (tmp_path / "keys.env").write_text(f"GATEWAY_KEY={KEY}\n")
    before = {p for p in run.parent.iterdir() if p.is_dir()}
    proc = run_cli("grade", str(run), "--secrets-file", "keys.env", "--runner", "process", "--runner-option",
                   "shards=2", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = [v for t in load(new_run(run.parent, before) / "results.json")["trials"] for v in t["verdicts"]
                if v["judge"] == "rubric"]
    assert len(verdicts) == 6 and all(v["passed"] for v in verdicts)
    assert fake.requests and all(r.headers.get("authorization") == f"Bearer {KEY}" for r in fake.requests)


# --- what an LLM judge needs, and which key it sends ----------------------------------------------


def _resolved(tmp: Path, llm: dict[str, Any]) -> ResolvedJudge:
    from mst.config.resolve import resolve_eval

    tmp.mkdir(exist_ok=True)
    (judge,) = resolve_eval(_eval(tmp, llm)).cases[0].judges
    return judge


@pytest.mark.parametrize(("llm", "env", "imports"), [
    ({"model": "openai:gpt-4.1-mini"}, ("OPENAI_API_KEY",), ("openai",)),
    ({"models": ["openai:gpt-4.1", "anthropic:claude-haiku-4-5", "mock"]},
     ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"), ("anthropic", "openai")),
    ({"model": "openai:gpt-4.1", "apiKeySecret": "MY_KEY"}, ("MY_KEY",), ("openai",)),
    ({"model": "openai:local", "baseUrl": "http://127.0.0.1:9/v1"}, (), ("openai",)),
    ({"model": "openai:local", "baseUrl": "http://127.0.0.1:9/v1", "apiKeySecret": "GW_KEY"}, ("GW_KEY",),
     ("openai",)),
    ({"model": "mock"}, (), ()),
])
def test_needs(tmp_path: Path, llm: dict[str, Any], env: tuple[str, ...], imports: tuple[str, ...]) -> None:
    assert needs(_resolved(tmp_path, llm)) == (env, (), imports)


class _Token:
    def __init__(self) -> None:
        self.value = "tok-1"

    def current(self) -> str:
        return self.value


def test_a_gateway_judge_sends_the_gateway_token_in_place_of_its_key(tmp_path: Path) -> None:
    token = _Token()
    access = JudgeAccess(secrets={"OPENAI_API_KEY": KEY}, token=token)
    gateway = spec(_resolved(tmp_path, {"model": "openai:local", "baseUrl": "http://127.0.0.1:9/v1"}))
    assert keys(gateway, access) == {"OPENAI_API_KEY": "tok-1"}
    token.value = "tok-2"  # refreshed: the next call sends the fresh one
    assert keys(gateway, access) == {"OPENAI_API_KEY": "tok-2"}
    assert keys(gateway, JudgeAccess(secrets={"OPENAI_API_KEY": KEY})) == {"OPENAI_API_KEY": KEY}  # no command set
    direct = spec(_resolved(tmp_path / "d", {"model": "openai:gpt-4.1"}))
    assert keys(direct, access) == {"OPENAI_API_KEY": KEY}  # the provider's own API keeps its key
    named = spec(_resolved(tmp_path / "n", {"model": "openai:gpt-4.1", "apiKeySecret": AUTH_TOKEN}))
    assert keys(named, access) == {AUTH_TOKEN: "tok-2"}
