"""Code judges: return forms, failures, identities, plugins and lazy views."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import FIXTURES, fixture_judge, make_case, task_decodes, view

from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedJudge
from mst.grading import (
    JudgeLoadError,
    JudgeReturnError,
    LiveSource,
    Verdict,
    grade_trial,
    load_callable,
    resolve_judge,
    to_preference,
    to_verdict,
)
from mst.session.events import make_event


def grade_with(judge: ResolvedJudge, answer: str | None = "42", transcript: Any = ()) -> dict[str, Any]:
    case = make_case(judges=[judge])
    return grade_trial(view(answer, case=case, transcript=transcript), case, LiveSource()).to_json()


# --- return forms -------------------------------------------------------------------------------


def test_bool_judge() -> None:
    record = grade_with(fixture_judge("returns_bool"))
    assert record["status"] == "graded" and record["passed"] is True
    (v,) = record["verdicts"]
    assert v["judge"] == "returns_bool" and v["kind"] == "code" and v["score"] is None
    assert v["identity"].startswith("sha256:") and v["durationMs"] >= 0
    assert grade_with(fixture_judge("returns_bool"), answer="41")["passed"] is False


def test_score_against_threshold() -> None:
    at = grade_with(fixture_judge("returns_score", options={"score": 0.5}, threshold=0.5))
    assert at["passed"] is True and at["verdicts"][0]["score"] == 0.5
    below = grade_with(fixture_judge("returns_score", options={"score": 0.49}, threshold=0.5))
    assert below["passed"] is False and below["status"] == "graded"


def test_tuple_dict_and_verdict_forms() -> None:
    v = grade_with(fixture_judge("returns_tuple"))["verdicts"][0]
    assert (v["passed"], v["reason"]) == (False, "not convincing")
    v = grade_with(fixture_judge("returns_score_tuple", options={"score": 0.9}, threshold=0.8))["verdicts"][0]
    assert (v["passed"], v["score"], v["reason"]) == (True, 0.9, "scored")
    v = grade_with(fixture_judge("returns_dict", options={"result": {"score": 0.2, "reason": "meh"}}))[
        "verdicts"
    ][0]
    assert (v["passed"], v["score"], v["reason"]) == (False, 0.2, "meh")
    v = grade_with(fixture_judge("returns_dict", options={"result": {"passed": True, "score": 0.1}}))[
        "verdicts"
    ][0]
    assert (v["passed"], v["score"]) == (True, 0.1)  # an explicit `passed` wins over the threshold
    v = grade_with(fixture_judge("returns_verdict"))["verdicts"][0]
    assert (v["passed"], v["score"], v["reason"], v["usage"]) == (True, 1.0, "fine", {"inputTokens": 3})


def test_async_judge() -> None:
    record = grade_with(fixture_judge("async_judge", options={"word": "42"}))
    assert record["passed"] is True and record["verdicts"][0]["reason"] == "async"


async def test_async_judge_from_inside_a_running_loop() -> None:
    # The sync grade_trial must work from code that already runs an event loop (a collector).
    record = grade_with(fixture_judge("async_judge", options={"word": "nope"}))
    assert record["status"] == "graded" and record["passed"] is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "NoneType"),
        ("yes", "str"),
        (float("nan"), "finite"),
        ({"reason": "no verdict"}, "needs 'passed' or 'score'"),
        ({"pass": True}, "unknown: pass"),
        ({"passed": "yes"}, "boolean"),
        ((True, "a", "b"), "(passed_or_score, reason)"),
        (({"passed": True}, "r"), "bool or a number"),
    ],
)
def test_bad_return_values_are_errors(value: Any, message: str) -> None:
    with pytest.raises(JudgeReturnError, match=message.replace("(", r"\(").replace(")", r"\)")):
        to_verdict(value, 0.5)


def test_verdict_normalisation_edge_cases() -> None:
    assert to_verdict(1, 0.5) == Verdict(True, 1.0)
    assert to_verdict(True, 2.0) == Verdict(True)  # a bool is a verdict, not the score 1
    assert to_verdict((0.3, None), 0.5) == Verdict(False, 0.3, None)
    assert to_preference(" b ") == ("B", None)
    assert to_preference(("TIE", "same")) == ("tie", "same")
    with pytest.raises(JudgeReturnError):
        to_preference("C")


def test_judge_returning_nothing_makes_the_trial_ungraded() -> None:
    record = grade_with(fixture_judge("returns_nothing"))
    assert record["status"] == "ungraded" and record["passed"] is None and record["verdicts"] == []
    assert "NoneType" in record["errors"][0]["message"]


def test_raising_judge_makes_the_trial_ungraded_not_infrastructure() -> None:
    judge = fixture_judge("raises")
    case = make_case(assertions=[{"type": "contains", "value": "4"}], judges=[judge])
    result = grade_trial(view("42", case=case), case, LiveSource())
    record = result.to_json()
    assert record["status"] == "ungraded" and record["passed"] is None
    assert record["verdicts"][0]["judge"] == "contains" and record["verdicts"][0]["passed"] is True
    (error,) = record["errors"]
    assert error["judge"] == "raises" and error["identity"] == judge.identity
    assert (
        "RuntimeError: the judge broke" in error["message"]
        and "mst_fixture_judges:raises" in error["message"]
    )


def test_judge_reads_the_transcript_through_the_view(tmp_path: Path) -> None:
    events = [
        make_event("tool.execution_start", {"toolCallId": "1", "toolName": "t", "input": {}}, component="x"),
        make_event(
            "tool.execution_complete",
            {"toolCallId": "1", "toolName": "t", "success": True, "output": "o", "durationMs": 1},
            component="x",
        ),
    ]
    v = grade_with(fixture_judge("counts_tools"), transcript=events)["verdicts"][0]
    assert (v["passed"], v["score"], v["reason"]) == (True, 1.0, "1 calls")


# --- resolving and identities ---------------------------------------------------------------------


def _module(tmp_path: Path, body: str) -> tuple[str, Path]:
    name = f"mst_tmp_judge_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return name, path


def test_identity_stable_and_sensitive_to_options_threshold_and_id() -> None:
    a = fixture_judge("returns_score", options={"score": 0.7})
    assert a.identity == fixture_judge("returns_score", options={"score": 0.7}).identity
    assert (
        a.source == "code"
        and a.target == "mst_fixture_judges:returns_score"
        and a.version.startswith("sha256:")
    )
    assert a.identity != fixture_judge("returns_score", options={"score": 0.8}).identity
    assert a.identity != fixture_judge("returns_score", options={"score": 0.7}, threshold=0.9).identity
    assert a.identity != fixture_judge("returns_score", id="other", options={"score": 0.7}).identity


def test_identity_changes_with_the_source_file(tmp_path: Path) -> None:
    name, path = _module(tmp_path, "def j(trial):\n    return True\n")
    cfg = JudgeConfig(id="j", code=f"{name}:j")
    first = resolve_judge(cfg, tmp_path)
    assert resolve_judge(cfg, tmp_path).identity == first.identity
    path.write_text("def j(trial):\n    return False\n")
    changed = resolve_judge(cfg, tmp_path)
    assert changed.identity != first.identity and changed.version != first.version


def test_pairwise_identity_differs_from_a_trial_judge_with_the_same_target() -> None:
    trial_judge = resolve_judge(JudgeConfig(id="pairwise", code="mst_fixture_judges:prefers_good"), FIXTURES)
    pair_judge = resolve_judge(
        PairwiseConfig(id="pairwise", code="mst_fixture_judges:prefers_good"), FIXTURES
    )
    assert trial_judge.identity != pair_judge.identity


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("mst_no_such_module_xyz:f", "cannot import 'mst_no_such_module_xyz'"),
        ("mst_fixture_judges:missing", "has no attribute 'missing'"),
        ("mst_fixture_judges:not_callable", "is not callable"),
    ],
)
def test_load_errors_name_the_judge_and_target(code: str, why: str) -> None:
    with pytest.raises(JudgeLoadError) as info:
        resolve_judge(JudgeConfig(id="my-judge", code=code), FIXTURES)
    assert "'my-judge'" in str(info.value) and code in str(info.value) and why in str(info.value)
    assert info.value.judge_id == "my-judge" and info.value.target == code


def test_module_that_fails_to_import_is_a_load_error(tmp_path: Path) -> None:
    name, _ = _module(tmp_path, "raise ImportError('needs a missing SDK')\n")
    with pytest.raises(JudgeLoadError, match="needs a missing SDK"):
        resolve_judge(JudgeConfig(id="j", code=f"{name}:j"), tmp_path)


def test_load_callable_refuses_code_that_differs_from_the_resolved_version() -> None:
    good = fixture_judge("returns_bool")
    assert load_callable(good) is load_callable(good)  # cached
    stale = ResolvedJudge(
        id="j",
        target="mst_fixture_judges:returns_bool",
        source="code",
        options={},
        threshold=0.5,
        version="sha256:not-this-code",
        identity=f"test-{uuid.uuid4()}",
    )
    with pytest.raises(JudgeLoadError, match="changed since it was resolved"):
        load_callable(stale)
    # ...and grading with it is a grading error, not a crash.
    case = make_case(judges=[stale])
    result = grade_trial(view(case=case), case, LiveSource())
    assert result.status == "ungraded" and "changed since it was resolved" in result.errors[0].message


def _install_plugin(root: Path, dist: str, version: str, module: str) -> None:
    info = root / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[mst.judges]\n{dist}-judge = {module}:judge\n")
    (root / f"{module}.py").write_text("def judge(trial, options):\n    return options.get('pass', True)\n")


def test_entry_point_plugin_identity_uses_the_distribution_version(tmp_path: Path) -> None:
    dist, module = f"mstplug{uuid.uuid4().hex[:8]}", f"mst_plugin_mod_{uuid.uuid4().hex[:8]}"
    for version in ("1.0.0", "1.1.0"):
        _install_plugin(tmp_path / version, dist, version, module)
    cfg = JudgeConfig(id="plug", plugin=f"{dist}-judge", options={"pass": False})
    sys.path.insert(0, str(tmp_path / "1.0.0"))
    try:
        old = resolve_judge(cfg, FIXTURES)
        assert old.source == "plugin" and old.version == f"{dist}==1.0.0"
        assert grade_with(old)["passed"] is False
        sys.path[0] = str(tmp_path / "1.1.0")
        new = resolve_judge(cfg, FIXTURES)
        assert new.version == f"{dist}==1.1.0" and new.identity != old.identity
    finally:
        sys.path.remove(sys.path[0])
    with pytest.raises(JudgeLoadError, match="no entry point"):
        resolve_judge(JudgeConfig(id="plug", plugin="mst-no-such-plugin-xyz"), FIXTURES)


def test_a_trial_view_takes_a_records_ending_without_an_abc_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt records give the ending as a read-only mapping view: it is taken as it is, with no
    isinstance against the Mapping ABC (two per trial graded, one of the regrade's costs)."""
    import abc
    from types import MappingProxyType

    from mst.grading.judges import TrialView

    checks: list[object] = []
    check = abc.ABCMeta.__instancecheck__

    def counting(cls: abc.ABCMeta, obj: object) -> bool:
        checks.append(obj)
        return check(cls, obj)

    ending = MappingProxyType({"kind": "trial", "reason": "done"})
    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", counting)
    trial = TrialView.of(make_case(), variant="v1", trial=0, answer="42", ending=ending, transcript=None)
    again = trial.unread()
    monkeypatch.undo()
    assert trial.ending is ending and again.ending is ending and trial.is_trial
    assert ending not in checks


def test_a_trial_view_hands_over_the_plain_bytes_it_read_once(tmp_path: Path) -> None:
    """The report copies the transcript grading read (docs/report.md): plain JSONL only, once."""
    from mst.grading.judges import TrialView

    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b'{"type":"a.b","data":{},"provenance":{}}\n')
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b'{"type":"a.b","data":{},"provenance":{}}\n\n')
    views = [TrialView.of(make_case(), variant="v1", trial=0, answer="42", ending={"kind": "trial"},
                          transcript=str(path)) for path in (plain, blank)]
    assert views[0].take_plain() is None  # nothing read yet
    assert [len(v.events) for v in views] == [1, 1]
    assert views[0].take_plain() == plain.read_bytes() and views[0].take_plain() is None
    assert views[1].take_plain() is None  # a blank line: not plain, the report reads it itself


def test_views_decode_the_case_task_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial's view and a case's view each take prompt, expected and metadata from one decode
    of the case's packed task (a view is made per trial graded; a decode per field tripled it)."""
    from mst.grading.judges import CaseView, TrialView

    case = make_case(expected="42")
    assert type(case._task) is bytes  # packed: each field read decodes it
    decodes = task_decodes(monkeypatch)
    trial = TrialView.of(case, variant="v", trial=0, answer="42", ending={"kind": "trial"}, transcript=None)
    assert len(decodes) == 1
    assert (trial.prompt, trial.expected, trial.metadata) == ("What is 6*7?", "42", {"topic": "math"})
    seen = CaseView.of(case)
    assert len(decodes) == 2
    assert (seen.prompt, seen.expected, seen.metadata) == ("What is 6*7?", "42", {"topic": "math"})
