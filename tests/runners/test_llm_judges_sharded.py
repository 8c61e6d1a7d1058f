"""LLM judges graded locally, in process shards and on Ray write the same files; `--resume`
grades again exactly the verdicts that failed and the judges that changed (docs/grading.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.clients_real.fake_provider import FakeProvider, serve, status, tool
from tests.helpers import basic_eval, load, mock_variant, run_cli, write_eval
from tests.runners.runners_helpers import assert_same_files, collected_run, new_run, normalized_run

KEY = "sk-judge-shards-0123456789"


@pytest.fixture()
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


def _llm(fake: FakeProvider, model: str, rubric: str = "The answer is the expected number.") -> dict[str, Any]:
    return {"model": f"openai:{model}", "rubric": rubric, "baseUrl": fake.openai_url, "retries": 1,
            "sees": ["prompt", "answer", "expected", "tool-calls"]}


def _eval(tmp: Path, fake: FakeProvider, *, rubric_a: str = "The answer is the expected number.") -> Path:
    mock_panel = {"models": ["mock", "mock"], "samples": 2, "vote": "mean", "rubric": "r", "scale": "score",
                  "mock": {"successRate": 0.6, "seed": 3, "answer": '{"score": 0.9, "reason": "close to {expected}"}',
                           "wrongAnswer": '{"score": 0.2, "reason": "far from {expected}"}'}}
    doc = basic_eval(
        trials=2,
        cases=[{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(6)],
        variants=[mock_variant("base", baseline=True), mock_variant("cand")],
        judges=[{"id": "a", "llm": _llm(fake, "judge-a", rubric_a), "secrets": ["OPENAI_API_KEY"]},
                {"id": "b", "llm": _llm(fake, "judge-b"), "secrets": ["OPENAI_API_KEY"]},
                {"id": "panel", "llm": mock_panel}],
        pairwise={"llm": {"model": "openai:judge-pair", "rubric": "Which is right?", "baseUrl": fake.openai_url},
                  "secrets": ["OPENAI_API_KEY"]},
    )
    return write_eval(tmp, doc)


def _script(fake: FakeProvider) -> None:
    fake.script("judge-a", [tool("submit_verdict", {"passed": True, "reason": "a: right number"})])
    fake.script("judge-b", [tool("submit_verdict", {"passed": False, "reason": "b: too terse"})])
    fake.script("judge-pair", [tool("submit_verdict", {"preference": "1", "reason": "the first"})])


def _requests(fake: FakeProvider, model: str) -> int:
    return sum(1 for r in fake.requests if r.body.get("model") == model)


def _grade(tmp: Path, source: Path, *extra: str, code: int = 0) -> Path:
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    proc = run_cli("grade", str(source), "--secrets-file", str(tmp / "judge.env"), *extra, cwd=tmp, timeout=300)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return new_run(source.parent, before)


def _without_latency(value: Any) -> Any:
    """A judge call's latency is a timing, like durationMs: it legitimately differs."""
    if isinstance(value, dict):
        return {k: _without_latency(v) for k, v in value.items() if k != "latencyMs"}
    if isinstance(value, list):
        return [_without_latency(v) for v in value]
    return value


def _setup(tmp: Path, fake: FakeProvider) -> Path:
    (tmp / "judge.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    _script(fake)
    return collected_run(tmp, _eval(tmp, fake))


def test_llm_judges_grade_the_same_locally_and_in_3_shards(tmp_path: Path, fake: FakeProvider) -> None:
    source = _setup(tmp_path, fake)
    local = _grade(tmp_path, source)
    local_requests = len(fake.requests)
    assert local_requests == 24 + 24 + 12 * 2  # judges a and b per trial; pairwise per pair, both orders
    sharded = _grade(tmp_path, source, "--runner", "process", "--runner-option", "shards=3")
    assert len(fake.requests) == 2 * local_requests  # each judge call made once, in a worker
    assert_same_files(_without_latency(normalized_run(sharded)), _without_latency(normalized_run(local)))
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)

    trial = load(local / "results.json")["trials"][0]
    verdicts = {v["judge"]: v for v in trial["verdicts"]}
    assert verdicts["a"]["passed"] is True and verdicts["b"]["passed"] is False
    assert verdicts["a"]["model"] == "openai:judge-a" and verdicts["a"]["costUsd"] is None
    assert len(verdicts["panel"]["votes"]) == 4 and verdicts["panel"]["costUsd"] == 0.0
    summary = load(local / "summary.json")
    cand = summary["variants"][1]
    assert cand["judges"]["a"]["passRate"] == 1.0 and cand["judges"]["b"]["passRate"] == 0.0
    assert cand["judges"]["b"]["interval"][1] < 0.5
    assert cand["pairwise"]["flips"]["rate"] == 1.0  # "Response 1" in both orders: every pair flips
    assert summary["judgeUsage"]["inputTokens"] == sum(v["judgeUsage"]["inputTokens"] for v in summary["variants"])
    for file in sharded.rglob("*"):
        assert not file.is_file() or KEY.encode() not in file.read_bytes()


def test_grade_resume_regrades_failed_and_changed_llm_judges(tmp_path: Path, fake: FakeProvider) -> None:
    source = _setup(tmp_path, fake)
    fake.script("judge-a", [status(503, "down", **{"retry-after-ms": "1"})])
    regrade = _grade(tmp_path, source, code=3)  # judge a failed everywhere: trials ungraded
    assert load(regrade / "run.json")["phases"]["grade"] == "partial"
    errors = [e for t in load(regrade / "results.json")["trials"] for e in t["errors"]]
    assert len(errors) == 24 and all(e["judge"] == "a" and e["kind"] == "llm" and "HTTP 503" in e["message"]
                                     for e in errors)
    b_calls, pair_calls = _requests(fake, "judge-b"), _requests(fake, "judge-pair")

    _script(fake)
    proc = run_cli("grade", str(regrade), "--resume", "--secrets-file", str(tmp_path / "judge.env"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _requests(fake, "judge-a") == 24 * 2 + 24  # the failed verdicts, graded again
    assert _requests(fake, "judge-b") == b_calls and _requests(fake, "judge-pair") == pair_calls  # kept
    assert load(regrade / "run.json")["phases"]["grade"] == "complete"

    _eval(tmp_path, fake, rubric_a="The answer is exactly the expected number.")  # judge a's identity changes
    proc = run_cli("grade", str(regrade), "--resume", "--secrets-file", str(tmp_path / "judge.env"),
                   "--runner", "process", "--runner-option", "shards=2", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _requests(fake, "judge-a") == 24 * 4  # regraded: its rubric changed
    assert _requests(fake, "judge-b") == b_calls and _requests(fake, "judge-pair") == pair_calls
    prompts = [str(r.body["messages"][-1]["content"]) for r in fake.requests if r.body.get("model") == "judge-a"]
    assert "exactly the expected number" in prompts[-1]


@pytest.mark.slow
def test_llm_judges_grade_the_same_on_ray(tmp_path: Path, fake: FakeProvider,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("ray")
    source = _setup(tmp_path, fake)
    local = _grade(tmp_path, source)
    temp = tmp_path_factory.mktemp("ray")
    on_ray = _grade(tmp_path, source, "--runner", "ray", "--runner-option", "shards=2",
                    "--runner-option", f"temp_dir={temp}")
    assert_same_files(_without_latency(normalized_run(on_ray)), _without_latency(normalized_run(local)))
