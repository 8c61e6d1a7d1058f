"""Every built-in assertion, its edge cases, and the transcript being read only when needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from grading_helpers import assertion, make_case, tool_events, view

from mst.grading import (
    AssertionConfigError,
    LiveSource,
    assertion_identity,
    compile_path,
    evaluate,
    grade_trial,
    select,
)
from mst.session.events import make_event
from mst.session.io import write_transcript


def check(answer: str | None, transcript: Any = (), expected: Any = None, **spec: Any) -> tuple[bool, str]:
    case = make_case(expected=expected)
    return evaluate(assertion(**spec), view(answer, case=case, transcript=transcript))


# --- contains / not-contains ------------------------------------------------------------------


def test_contains_and_not_contains() -> None:
    assert check("The answer is 42", type="contains", value="42")[0] is True
    assert check("The answer is 41", type="contains", value="42")[0] is False
    assert check("The answer is 42", type="not-contains", value="42")[0] is False
    assert check("The answer is 41", type="not-contains", value="42")[0] is True


def test_contains_ignore_case_and_missing_answer() -> None:
    assert check("HELLO", type="contains", value="hello")[0] is False
    assert check("HELLO", type="contains", value="hello", ignoreCase=True)[0] is True
    passed, reason = check(None, type="contains", value="x")
    assert passed is False and "no answer" in reason
    assert check(None, type="not-contains", value="x")[0] is True


def test_contains_on_transcript_reads_agent_assistant_messages_only() -> None:
    events = tool_events(("add", {"a": 1}, True))
    events.append(
        make_event("assistant.message", {"content": "judge says SECRET"}, component="j", phase="judge")
    )
    assert check("no", events, type="contains", value="look that up", field="transcript")[0] is True
    assert check("no", events, type="contains", value="SECRET", field="transcript")[0] is False
    blocks = [
        make_event("assistant.message", {"content": [{"type": "text", "text": "block text"}]}, component="t")
    ]
    assert check("no", blocks, type="contains", value="block text", field="transcript")[0] is True


# --- regex --------------------------------------------------------------------------------------


def test_regex() -> None:
    passed, reason = check("total: 42 items", type="regex", pattern=r"\b\d+\b")
    assert passed and "'42'" in reason
    assert check("no digits", type="regex", pattern=r"\d")[0] is False
    assert check("ABC", type="regex", pattern=r"(?i)abc")[0] is True
    assert check(None, type="regex", pattern=r".*")[0] is False


# --- equals --------------------------------------------------------------------------------------


def test_equals_strings_strip_and_case() -> None:
    assert check("  42\n", type="equals", value="42")[0] is True
    assert check("  42\n", type="equals", value="42", strip=False)[0] is False
    assert check("Paris", type="equals", value="paris")[0] is False
    assert check("Paris", type="equals", value="paris", ignoreCase=True)[0] is True


def test_equals_defaults_to_case_expected() -> None:
    assert check("42", expected="42", type="equals")[0] is True
    passed, reason = check("41", expected="42", type="equals")
    assert passed is False and "expected '42'" in reason


def test_equals_without_value_or_expected_is_an_error_not_a_failure() -> None:
    with pytest.raises(AssertionConfigError, match="no 'value'"):
        check("42", type="equals")


def test_equals_explicit_null_is_a_value() -> None:
    assert check("null", expected="42", type="equals", value=None)[0] is True
    assert check(None, expected="42", type="equals", value=None)[0] is True


def test_equals_non_string_compares_as_json() -> None:
    assert check("42", type="equals", value=42)[0] is True
    assert check("42.0", type="equals", value=42)[0] is True
    assert check('{"b": [1, 2], "a": 1}', expected={"a": 1, "b": [1, 2]}, type="equals")[0] is True
    assert check("1", type="equals", value=True)[0] is False  # JSON true is not 1
    assert check("true", type="equals", value=True)[0] is True
    passed, reason = check("forty-two", type="equals", value=42)
    assert passed is False and "not JSON" in reason


# --- json-path ----------------------------------------------------------------------------------


DOC = '{"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}], "weird key": {"x": null}, "ok": true}'


def test_json_path_compile_subset() -> None:
    steps, indefinite = compile_path("$.items[0]['name']")
    assert steps == (("key", "items"), ("index", 0), ("key", "name")) and not indefinite
    steps, indefinite = compile_path('$["weird key"].x')
    assert steps == (("key", "weird key"), ("key", "x")) and not indefinite
    assert compile_path("$.items[*].name")[1] is True
    assert compile_path("$")[0] == ()
    assert compile_path(r"$['it\'s']")[0] == (("key", "it's"),)


@pytest.mark.parametrize("bad", ["items", "$.", "$[", "$[abc]", "$..x", "$.a b", "$['a'b']"])
def test_json_path_syntax_errors(bad: str) -> None:
    with pytest.raises(AssertionConfigError):
        compile_path(bad)


def test_json_path_select() -> None:
    doc = {"items": [{"name": "a"}, {"name": "b"}], "x": {"y": 1}}
    assert select(doc, compile_path("$.items[*].name")[0]) == ["a", "b"]
    assert select(doc, compile_path("$.items[-1].name")[0]) == ["b"]
    assert select(doc, compile_path("$.items[5]")[0]) == []
    assert select(doc, compile_path("$.x.*")[0]) == [1]
    assert select(doc, compile_path("$.x[0]")[0]) == []  # an index into an object matches nothing


def test_json_path_assertion() -> None:
    assert check(DOC, type="json-path", path="$.items[1].name", equals="b")[0] is True
    assert check(DOC, type="json-path", path="$.items[1].n", equals=3)[0] is False
    assert check(DOC, type="json-path", path="$.items[*].n", equals=[1, 2])[0] is True
    assert check(DOC, type="json-path", path="$.ok", equals=1)[0] is False
    assert check(DOC, type="json-path", path="$['weird key'].x", equals=None)[0] is True  # explicit null
    assert check(DOC, type="json-path", path="$['weird key'].x")[0] is True  # exists (its value is null)
    assert check(DOC, type="json-path", path="$.missing")[0] is False
    assert check(DOC, type="json-path", path="$.missing", equals=None)[0] is False
    assert check(DOC, type="json-path", path="$.items[*].zzz", equals=[])[0] is True


def test_json_path_on_non_json_and_fenced_answers() -> None:
    passed, reason = check("not json", type="json-path", path="$.a")
    assert passed is False and "not JSON" in reason
    fenced = '```json\n{"a": 1}\n```'
    assert check(fenced, type="json-path", path="$.a", equals=1)[0] is True


# --- tool assertions --------------------------------------------------------------------------


CALLS = tool_events(
    ("add", {"a": 1, "b": {"c": 2, "d": 3}}, True), ("add", {"a": 5}, False), ("search", {"q": "x"}, True)
)


def test_tool_called_with_and_without_args() -> None:
    assert check("", CALLS, type="tool-called", tool="add")[0] is True
    assert check("", CALLS, type="tool-called", tool="add", args={"a": 5})[0] is True
    assert check("", CALLS, type="tool-called", tool="add", args={"b": {"c": 2}})[0] is True  # nested subset
    passed, reason = check("", CALLS, type="tool-called", tool="add", args={"a": 2})
    assert passed is False and "never with" in reason
    assert check("", CALLS, type="tool-called", tool="add", args={"a": True})[0] is False
    assert check("", CALLS, type="tool-called", tool="delete")[0] is False
    assert check("", CALLS, type="tool-called", tool="calc/search")[0] is True  # server-qualified


def test_tool_not_called() -> None:
    assert check("", CALLS, type="tool-not-called", tool="delete")[0] is True
    assert check("", CALLS, type="tool-not-called", tool="add")[0] is False
    assert check("", CALLS, type="tool-not-called", tool="add", args={"a": 9})[0] is True


def test_tool_call_count_bounds() -> None:
    assert check("", CALLS, type="tool-calls", min=3, max=3)[0] is True
    assert check("", CALLS, type="tool-calls", max=2)[0] is False
    assert check("", CALLS, type="tool-calls", tool="add", min=2)[0] is True
    assert check("", CALLS, type="tool-calls", tool="search", min=2)[0] is False
    assert check("", [], type="tool-calls", max=0)[0] is True


def test_tool_calls_ignore_other_phases_and_count_unfinished() -> None:
    events = tool_events(("add", {}, True)) + tool_events(("judge_tool", {}, True), phase="judge")
    events.append(
        make_event(
            "tool.execution_start", {"toolCallId": "u", "toolName": "slow", "input": {}}, component="t"
        )
    )
    trial = view("", transcript=events)
    names = [(c["name"], c["success"]) for c in trial.tool_calls]
    assert names == [("add", True), ("slow", False)]
    assert trial.tool_calls[1]["error"] == "unfinished"
    assert check("", events, type="tool-called", tool="judge_tool")[0] is False


# --- final-answer -------------------------------------------------------------------------------


def test_final_answer() -> None:
    assert check("42", type="final-answer")[0] is True
    assert check("  \n", type="final-answer")[0] is False
    assert check(None, type="final-answer")[0] is False


# --- identity and laziness ------------------------------------------------------------------------


def test_assertion_identity_is_a_digest_of_its_config() -> None:
    a = assertion(type="contains", value="42")
    assert assertion_identity(a) == assertion_identity(assertion(type="contains", value="42"))
    assert assertion_identity(a) != assertion_identity(assertion(type="contains", value="43"))
    assert assertion_identity(a) != assertion_identity(
        assertion(type="contains", value="42", ignoreCase=True)
    )
    assert assertion_identity(a).startswith("sha256:")


def test_answer_assertions_never_read_the_transcript(tmp_path: Path) -> None:
    missing = tmp_path / "never-written.jsonl"
    case = make_case(assertions=[{"type": "contains", "value": "42"}, {"type": "final-answer"}])
    result = grade_trial(view("42", case=case, transcript=missing), case, LiveSource())
    assert result.status == "graded" and result.passed is True


def test_tool_assertion_reads_the_transcript_file_once(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, tool_events(("add", {"a": 1}, True)))
    case = make_case(assertions=[{"type": "tool-called", "tool": "add"}, {"type": "tool-calls", "max": 1}])
    trial = view("42", case=case, transcript=path)
    assert grade_trial(trial, case, LiveSource()).passed is True
    path.unlink()  # already read: the view does not read it again
    assert len(trial.tool_calls) == 1


def test_missing_or_absent_transcript_makes_tool_assertions_ungraded(tmp_path: Path) -> None:
    case = make_case(
        assertions=[{"type": "contains", "value": "42"}, {"type": "tool-not-called", "tool": "rm"}]
    )
    for transcript in (tmp_path / "gone.jsonl", None):
        result = grade_trial(view("42", case=case, transcript=transcript), case, LiveSource())
        assert result.status == "ungraded" and result.passed is None
        assert [e.judge for e in result.errors] == ["tool-not-called"]
        assert "transcript" in result.errors[0].message
        assert [v.judge for v in result.verdicts] == ["contains"]


# --- one tool-call definition: the session lookups --------------------------------------------


def test_tool_assertions_and_graders_agree_on_an_empty_phase() -> None:
    """A call recorded with an empty provenance phase is the agent's for the graders' lookups; the
    assertions used to correlate calls themselves and leave it out."""
    from mst.graders import parse_graders_config, run_graders
    from mst.session.lookups import create_session_lookups

    events = tool_events(("add", {"a": 1}, True), phase="")
    assert check("", events, type="tool-called", tool="add")[0] is True
    assert check("", events, type="tool-calls", min=1, max=1)[0] is True
    assert len(view("", transcript=events).tool_calls) == len(create_session_lookups(events).tool_calls) == 1
    run = run_graders(events, parse_graders_config({"tool-failure-count": {}}))
    assert next(r for r in run.results if r["id"] == "tool-failure-count")["value"] == 0.0


def _rejected(*, on_start: bool) -> list[dict[str, Any]]:
    """An agent's session: ``add`` reached its server; ``delete`` was refused by mst (never sent)."""
    events = tool_events(("add", {"a": 1}, True))
    start = {"toolCallId": "r1", "toolName": "delete", "input": {"path": "/"}, "mcpServerName": "calc"}
    done = {"toolCallId": "r1", "toolName": "delete", "success": False, "error": "unknown tool", "rejected": True}
    if on_start:
        start["rejected"] = True
    events.append(make_event("tool.execution_start", start, component="t"))
    events.append(make_event("tool.execution_complete", done, component="t"))
    return events


@pytest.mark.parametrize("on_start", [True, False])
def test_tool_assertions_count_only_calls_that_reached_a_server(on_start: bool) -> None:
    events = _rejected(on_start=on_start)
    calls = view("", transcript=events).tool_calls
    assert [(c["name"], c["rejected"]) for c in calls] == [("add", False), ("delete", True)]
    assert check("", events, type="tool-called", tool="delete")[0] is False
    assert check("", events, type="tool-not-called", tool="delete")[0] is True
    assert check("", events, type="tool-calls", max=1)[0] is True
    assert check("", events, type="tool-calls", tool="delete", max=0)[0] is True
    # ...unless the assertion asks for the rejected calls too.
    assert check("", events, type="tool-called", tool="delete", includeRejected=True)[0] is True
    assert check("", events, type="tool-not-called", tool="delete", includeRejected=True)[0] is False
    assert check("", events, type="tool-calls", min=2, includeRejected=True)[0] is True


def test_the_reject_option_leaves_existing_identities_alone() -> None:
    plain = assertion(type="tool-called", tool="add")
    assert assertion_identity(plain) == assertion_identity(assertion(type="tool-called", tool="add",
                                                                      includeRejected=False))
    assert assertion_identity(plain) != assertion_identity(assertion(type="tool-called", tool="add",
                                                                      includeRejected=True))


def test_a_trial_s_lookups_are_built_once_for_its_assertions_and_graders(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool assertion and the deterministic graders read one set of lookups per trial (the
    graders take the trial's own when the session is its events, unredacted); with redaction the
    graders' session is a copy and gets lookups of its own. The results are the same either way."""
    from mst.graders import results as results_module
    from mst.graders.config import parse_graders_config
    from mst.grading import GradingContext
    from mst.grading import judges as judges_module
    from mst.session.redact import Redactor

    built: list[int] = []
    real = results_module.create_session_lookups

    def counting(session: Any) -> Any:
        built.append(len(session))
        return real(session)

    monkeypatch.setattr(results_module, "create_session_lookups", counting)
    monkeypatch.setattr(judges_module, "create_session_lookups", counting)
    case = make_case(assertions=[{"type": "tool-called", "tool": "add"}])
    graded = []
    for redactor in (None, Redactor(["sekrit"])):
        built.clear()
        context = GradingContext(parse_graders_config(None)) if redactor is None \
            else GradingContext(parse_graders_config(None), redactor)
        grading = grade_trial(view("", case=case, transcript=CALLS), case, LiveSource(), context=context)
        assert grading.status == "graded" and grading.graders is not None
        graded.append(grading.graders)
        assert len(built) == (1 if redactor is None else 2)
    assert graded[0] == graded[1]
