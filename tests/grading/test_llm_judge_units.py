"""LLM judges without a network: the `llm:` config, what the judge sees, votes, identity, the mock judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import basic_eval, write_eval

from mst.config.errors import UserError
from mst.config.resolve import resolve_eval
from mst.grading.judges import CaseView, TrialView
from mst.grading.llm_judge import Vote, combine, combine_preferences, parse, spec
from mst.grading.llm_prompt import trial_prompt
from mst.grading.sources import LiveSource
from mst.providers.base import ModelResponse, ToolCall
from mst.session.render import render_transcript


def _resolve(tmp: Path, llm: dict[str, Any], **judge: Any) -> Any:
    doc = basic_eval(judges=[{"id": "j", "llm": {"model": "mock", "rubric": "r", **llm}, **judge}])
    return resolve_eval(write_eval(tmp, doc)).cases[0].judges[0]


def _error(tmp: Path, llm: dict[str, Any]) -> str:
    with pytest.raises(UserError) as info:
        _resolve(tmp, llm)
    return str(info.value)


def test_unknown_template_field_names_the_field_path(tmp_path: Path) -> None:
    text = _error(tmp_path, {"template": "Grade {answer} against {expectd}."})
    assert "judges[0].llm.template: unknown field {expectd}" in text
    assert "{expectd}" in text
    assert "{prompt.x}" in _error(tmp_path, {"template": "{prompt.x}"})


def test_config_errors(tmp_path: Path) -> None:
    assert "exactly one of 'model' or 'models'" in _error(tmp_path, {"models": ["mock"]})
    assert "'sees' does not list" in _error(tmp_path, {"template": "{transcript}", "sees": ["answer"]})
    assert "unknown model provider 'opnai'" in _error(tmp_path, {"model": "opnai:gpt-4.1"})
    assert "llm.mock.successRate" in _error(tmp_path, {"mock": {"successRate": 3}})
    doc = basic_eval(judges=[{"id": "j", "code": "x:y", "llm": {"model": "mock", "rubric": "r"}}])
    with pytest.raises(UserError, match="exactly one of 'code'"):
        resolve_eval(write_eval(tmp_path, doc))


def test_identity_digests_what_decides_verdicts(tmp_path: Path) -> None:
    base = _resolve(tmp_path, {}).identity
    for change in ({"rubric": "other"}, {"model": "openai:gpt-4.1"}, {"scale": "score"}, {"sees": ["answer"]},
                   {"samples": 3}, {"template": "{answer}"}, {"temperature": 0.5}):
        assert _resolve(tmp_path, change).identity != base, change
    assert _resolve(tmp_path, {"models": ["mock", "mock"], "model": None}).identity != base
    assert _resolve(tmp_path, {"models": ["mock", "mock"], "model": None, "vote": "all"}).identity != \
        _resolve(tmp_path, {"models": ["mock", "mock"], "model": None}).identity
    for same in ({"timeoutSeconds": 5}, {"retries": 0}, {"prices": {"mock": {"input": 1, "output": 1}}}):
        assert _resolve(tmp_path, same).identity == base, same


EVENTS = [
    {"type": "user.message", "data": {"content": "find the hammer"}, "provenance": {"phase": "agent"}},
    *[e for i in range(40) for e in (
        {"type": "tool.execution_start", "data": {"toolCallId": f"t{i}", "toolName": "search",
                                                  "input": {"q": f"hammer {i}"}}, "provenance": {"phase": "agent"}},
        {"type": "tool.execution_complete", "data": {"toolCallId": f"t{i}", "toolName": "search", "success": True,
                                                     "output": "x" * 200}, "provenance": {"phase": "agent"}})],
    {"type": "assistant.message", "data": {"content": "It costs 18.99."}, "provenance": {"phase": "agent"}},
]


def test_transcript_over_budget_is_cut_visibly() -> None:
    whole = render_transcript(EVENTS)
    assert "find the hammer" in whole and "[…" not in whole and "`search`" in whole
    cut = render_transcript(EVENTS, budget_chars=2000)
    assert len(cut) <= 2000
    assert "**User:** find the hammer" in cut and "It costs 18.99." in cut  # both ends kept
    assert "events cut: transcript over the judge's budget" in cut


def _trial(**kw: Any) -> TrialView:
    return TrialView(variant="v", case_id="c", trial=0, answer="It costs 18.99.", ending={"kind": "trial"},
                     transcript=EVENTS, **kw)


CASE = CaseView("c", "How much is the hammer?", "18.99", {"sku": "HAM-001", "shelf": 4}, 1)


def test_what_the_judge_sees_is_explicit(tmp_path: Path) -> None:
    default = trial_prompt(spec(_resolve(tmp_path, {})), _trial(), CASE)
    assert "How much is the hammer?" in default and "It costs 18.99." in default and "18.99" in default
    assert "find the hammer" not in default and "HAM-001" not in default  # not asked to see them
    seen = trial_prompt(spec(_resolve(tmp_path, {"sees": ["answer", "transcript", "metadata"],
                                                 "maxInputTokens": 1000})), _trial(), CASE)
    assert "find the hammer" in seen and "HAM-001" in seen and "How much is the hammer?" not in seen
    assert "over the judge's budget" in seen and len(seen) < 4400
    templated = trial_prompt(spec(_resolve(tmp_path, {"template": "SKU {metadata.sku}: {answer} {{ok}}"})),
                             _trial(), CASE)
    assert templated == "SKU HAM-001: It costs 18.99. {ok}"


def _response(data: dict[str, Any], as_tool: bool = True) -> ModelResponse:
    import orjson

    if as_tool:
        return ModelResponse("", (ToolCall("1", "submit_verdict", data),))
    return ModelResponse(orjson.dumps(data).decode())


def test_parse_scales_strictly() -> None:
    assert parse(_response({"rating": 4, "reason": "good"}), "likert-5", 0.5)[:2] == (True, 0.75)
    assert parse(_response({"rating": 2, "reason": "poor"}, False), "likert-5", 0.5)[:2] == (False, 0.25)
    assert parse(_response({"preference": "2", "reason": "x"}), "pairwise", 0.5)[2] == "B"
    from mst.grading.llm_judge import Unparseable

    for bad, scale in (({"rating": 6, "reason": "x"}, "likert-5"), ({"score": 1.5, "reason": "x"}, "score"),
                       ({"passed": True}, "pass-fail"), ({"passed": True, "reason": "x", "extra": 1}, "pass-fail"),
                       ({"preference": "A", "reason": "x"}, "pairwise")):
        with pytest.raises(Unparseable):
            parse(_response(bad), scale, 0.5)  # type: ignore[arg-type]


def _vote(passed: bool | None = None, score: float | None = None, preference: Any = None) -> Vote:
    return Vote("mock", 0, passed, score, preference, "because", 1, 1, 1.0, 0.0)


def test_votes_combine() -> None:
    votes = [_vote(True, 1.0), _vote(False, 0.0), _vote(False, 0.4)]
    assert combine(votes, "majority", 0.5)[:2] == (False, pytest.approx(1.4 / 3))
    assert combine(votes, "mean", 0.4)[0] is True
    assert combine([_vote(True, 1.0), _vote(True, 0.9)], "all", 0.5)[0] is True
    assert combine(votes, "all", 0.5)[0] is False
    assert "1/3 votes pass (majority)" in combine(votes, "majority", 0.5)[2]
    prefs = [_vote(preference="A"), _vote(preference="A"), _vote(preference="B")]
    assert combine_preferences(prefs, "majority")[0] == "A"
    assert combine_preferences(prefs, "all")[0] == "tie"
    assert combine_preferences([*prefs, _vote(preference="B")], "mean")[0] == "tie"


def test_mock_judge_is_scripted_seeded_and_deterministic(tmp_path: Path) -> None:
    def verdicts(seed: int) -> list[bool]:
        judge = _resolve(tmp_path, {"mock": {"successRate": 0.5, "seed": seed,
                                             "answer": '{"passed": true, "reason": "has {expected}"}',
                                             "wrongAnswer": '{"passed": false, "reason": "lacks {expected}"}'}})
        out = []
        for trial in range(40):
            view = TrialView(variant="v", case_id="c", trial=trial, answer="a", ending={"kind": "trial"},
                             transcript=None)
            outcome = LiveSource().judge(judge, view, CASE)
            assert outcome.verdict is not None and outcome.verdict.reason in ("has 18.99", "lacks 18.99")
            out.append(outcome.verdict.passed)
        return out

    first = verdicts(1)
    assert first == verdicts(1) and 5 < sum(first) < 35
    assert verdicts(2) != first


def test_mock_judge_garbage_is_a_grading_error(tmp_path: Path) -> None:
    judge = _resolve(tmp_path, {"mock": {"answer": "looks fine to me"}})
    outcome = LiveSource().judge(judge, _trial(), CASE)
    assert outcome.verdict is None and outcome.error is not None
    assert "judge 'j' (llm mock)" in outcome.error and "unparseable verdict twice" in outcome.error


def test_artifacts_and_tool_calls_are_shown_when_asked(tmp_path: Path) -> None:
    artifacts = tmp_path / "art"
    (artifacts / "src").mkdir(parents=True)
    (artifacts / "src" / "fix.py").write_text("print('fixed')\n")
    (artifacts / "blob.bin").write_bytes(b"\xff\xfe\x00" * 10)
    judge = spec(_resolve(tmp_path, {"sees": ["answer", "artifacts", "tool-calls"]}))
    prompt = trial_prompt(judge, _trial(artifacts_dir=artifacts), CASE)
    assert "--- src/fix.py (15 bytes)" in prompt and "print('fixed')" in prompt
    assert "--- blob.bin (30 bytes)\n(binary)" in prompt
    assert '"name":"search"' in prompt and "hammer 39" in prompt  # the agent's tool calls, as assertions read them
    none = trial_prompt(judge, TrialView(variant="v", case_id="c", trial=0, answer=None, ending={"kind": "trial"},
                                         transcript=None), CASE)
    assert "(no artifacts)" in none and "(no final answer)" in none and "(unavailable:" in none


def test_judge_figures_per_variant() -> None:
    from mst.runs.grading_records import CaseComparison, PairRecord, VerdictRecord
    from mst.runs.judge_summary import JudgeTally, total

    calls = {"model": "mock", "inputTokens": 10, "outputTokens": 2, "latencyMs": 1.0, "costUsd": 0.5, "votes": []}
    tally = JudgeTally()
    for passed in (True, True, False, True):
        tally.add(VerdictRecord("llm-j", "llm", "sha256:x", passed, None, None, None, None, calls))
        tally.add(VerdictRecord("code-j", "code", "sha256:y", passed))
        tally.add(VerdictRecord("equals", "assertion", "sha256:z", passed))
    figures = tally.to_json(0.95)
    assert set(figures) == {"llm-j", "code-j"}  # assertions are not judges
    llm = figures["llm-j"]
    assert (llm["passed"], llm["graded"], llm["passRate"]) == (3, 4, 0.75)
    assert 0 < llm["interval"][0] < 0.75 < llm["interval"][1] < 1
    assert (llm["inputTokens"], llm["outputTokens"], llm["costUsd"]) == (40, 8, 2.0)
    assert figures["code-j"]["costUsd"] is None  # no model calls: unknown, not free
    pair = PairRecord(0, "candidate", "baseline", "tie", None, ({**calls, "costUsd": None}, calls))
    tally.add_comparison(CaseComparison("c", "cand", "base", "pairwise", "sha256:p", (pair,), ()))
    usage = tally.usage.to_json()
    assert usage["inputTokens"] == 60 and usage["costUsd"] is None  # one call without a price: no total
    assert total([usage, {"inputTokens": 1, "outputTokens": 1, "costUsd": 1.0}])["inputTokens"] == 61
