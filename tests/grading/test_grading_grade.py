"""grade_trial (records, keep/resume, async judges) and compare_pairwise (both orders, flips, pairing)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from grading_helpers import calls, fixture_judge, make_case, pairwise_judge, view

from mst.grading import (
    GradingContext,
    LiveSource,
    TrialView,
    compare_pairwise,
    grade_trial,
    grader_names,
)

INFRA = {"kind": "infrastructure", "what": "network", "why": "reset", "retryable": True}


def _strip_timing(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    out["verdicts"] = [{k: v for k, v in x.items() if k != "durationMs"} for x in record["verdicts"]]
    return out


def test_record_shape_and_unique_names() -> None:
    case = make_case(
        assertions=[
            {"type": "contains", "value": "4"},
            {"type": "contains", "value": "2"},
            {"type": "regex", "pattern": "9", "id": "nine"},
        ],
        judges=[fixture_judge("returns_bool")],
    )
    record = grade_trial(view("42", case=case, variant="cand", trial=3), case, LiveSource()).to_json()
    assert {k: record[k] for k in ("variant", "case", "trial", "status", "passed", "errors")} == {
        "variant": "cand",
        "case": "c1",
        "trial": 3,
        "status": "graded",
        "passed": False,
        "errors": [],
    }
    assert [(v["judge"], v["kind"], v["passed"]) for v in record["verdicts"]] == [
        ("contains", "assertion", True),
        ("contains#2", "assertion", True),
        ("nine", "assertion", False),
        ("returns_bool", "code", True),
    ]
    assert set(record["verdicts"][0]) == {"judge", "kind", "identity", "passed", "score", "reason"}
    assert [n for n, _ in grader_names(case)] == ["contains", "contains#2", "nine", "returns_bool"]


def test_a_trial_without_graders_is_graded_and_passes_vacuously() -> None:
    case = make_case()
    assert grade_trial(view(case=case), case, LiveSource()).to_json()["passed"] is True


def test_infrastructure_failures_are_never_graded() -> None:
    case = make_case(assertions=[{"type": "final-answer"}])
    with pytest.raises(ValueError, match="infrastructure failure"):
        grade_trial(view(case=case, ending=INFRA), case, LiveSource())


def test_trial_outcomes_other_than_completed_are_graded_as_usual() -> None:
    case = make_case(assertions=[{"type": "final-answer"}])
    ending = {"kind": "trial", "outcome": "turn-limit"}
    assert grade_trial(view(None, case=case, ending=ending), case, LiveSource()).to_json()["passed"] is False


def test_keep_skips_judges_with_a_valid_verdict() -> None:
    judge = fixture_judge("returns_score", options={"score": 0.9})
    case = make_case(assertions=[{"type": "final-answer"}], judges=[judge])
    first = grade_trial(view(case=case), case, LiveSource()).to_json()
    keep = {v["judge"]: v for v in first["verdicts"]}
    before = calls("returns_score")
    again = grade_trial(view(case=case), case, LiveSource(), keep=keep).to_json()
    assert calls("returns_score") == before  # not called again
    assert again == first

    # A verdict from a judge whose identity changed is not kept: the judge runs again.
    stale = {**keep, "returns_score": {**keep["returns_score"], "identity": "sha256:old", "passed": False}}
    regraded = grade_trial(view(case=case), case, LiveSource(), keep=stale).to_json()
    assert calls("returns_score") == before + 1
    assert regraded["verdicts"][1]["passed"] is True

    # An earlier error is never kept.
    errored = {"returns_score": {"judge": "returns_score", "identity": judge.identity, "message": "boom"}}
    grade_trial(view(case=case), case, LiveSource(), keep=errored)
    assert calls("returns_score") == before + 2


def test_async_judges_grade_in_the_one_path() -> None:
    judges = [
        fixture_judge("returns_bool"),
        fixture_judge("async_judge", options={"word": "4"}),
        fixture_judge("raises"),
    ]
    case = make_case(assertions=[{"type": "contains", "value": "42"}], judges=judges)
    sync = grade_trial(view(case=case), case, LiveSource()).to_json()
    keep = {"returns_bool": next(v for v in sync["verdicts"] if v["judge"] == "returns_bool")}
    asynchronous = grade_trial(view(case=case), case, LiveSource(), keep=keep).to_json()
    assert _strip_timing(asynchronous) == _strip_timing(sync)
    assert sync["status"] == "ungraded" and [e["judge"] for e in sync["errors"]] == ["raises"]


def test_assertion_only_grading_is_fast() -> None:
    case = make_case(
        assertions=[
            {"type": "contains", "value": "42"},
            {"type": "regex", "pattern": r"\d+"},
            {"type": "final-answer"},
        ]
    )
    source, context = LiveSource(), GradingContext()  # a run's context: the case's plan is made once
    trials = [view("The answer is 42", case=case, trial=i) for i in range(5000)]
    grade_trial(trials[0], case, source, context=context)
    start = time.process_time()  # CPU time: a loaded CI machine stretches wall time, not this
    for t in trials:
        grade_trial(t, case, source, context=context)
    per_trial = (time.process_time() - start) / len(trials)
    assert per_trial < 200e-6, f"{per_trial * 1e6:.1f} µs of CPU per trial"  # tens of µs; a bound, not a benchmark


# --- pairwise ----------------------------------------------------------------------------------


def sides(answers: dict[int, str | None], variant: str, infra: set[int] | None = None) -> list[TrialView]:
    case = make_case(trials=len(answers))
    return [
        view(a, case=case, variant=variant, trial=i, ending=INFRA if infra and i in infra else None)
        for i, a in answers.items()
    ]


def test_consistent_preferences_count_and_record_shape() -> None:
    judge = pairwise_judge("prefers_good")
    case = make_case(trials=3)
    cand = sides({0: "good", 1: "good", 2: "bad"}, "cand")
    base = sides({0: "bad", 1: "good", 2: "good"}, "base")
    record = compare_pairwise(case, cand, base, judge, LiveSource()).to_json()
    assert {k: record[k] for k in ("case", "candidate", "baseline", "judge", "identity")} == {
        "case": "c1",
        "candidate": "cand",
        "baseline": "base",
        "judge": "pairwise",
        "identity": judge.identity,
    }
    assert [(p["trial"], p["ab"], p["ba"], p["preference"]) for p in record["pairs"]] == [
        (0, "candidate", "candidate", "candidate"),
        (1, "tie", "tie", "tie"),
        (2, "baseline", "baseline", "baseline"),
    ]
    assert (record["wins"], record["ties"], record["losses"], record["preference"]) == (1, 1, 1, "tie")
    assert record["errors"] == []


def test_position_bias_flip_is_a_tie() -> None:
    judge = pairwise_judge("always_a")
    case = make_case(trials=2)
    before = calls("always_a")
    result = compare_pairwise(
        case, sides({0: "x", 1: "y"}, "cand"), sides({0: "x", 1: "y"}, "base"), judge, LiveSource()
    )
    assert calls("always_a") == before + 4  # both orders for each pair
    assert [(p["ab"], p["ba"], p["preference"]) for p in result.to_json()["pairs"]] == [
        ("candidate", "baseline", "tie")
    ] * 2
    assert result.pairs[0].reasons == {"ab": "first is best", "ba": "first is best"}
    assert (result.wins, result.ties, result.losses, result.preference) == (0, 2, 0, "tie")


def test_pairs_only_where_both_sides_have_a_trial() -> None:
    judge = pairwise_judge("prefers_good")
    case = make_case(trials=4)
    cand = sides({0: "good", 1: "good", 2: "good"}, "cand", infra={1})
    base = sides({0: "bad", 1: "bad", 2: "bad", 3: "bad"}, "base")
    result = compare_pairwise(case, cand, base, judge, LiveSource())
    assert [p["trial"] for p in result.to_json()["pairs"]] == [0, 2]
    assert result.preference == "candidate" and result.wins == 2
    empty = compare_pairwise(case, [], base, judge, LiveSource(), candidate="cand")
    assert empty.pairs == () and empty.preference is None and empty.to_json()["candidate"] == "cand"


def test_pairwise_errors_leave_the_pair_out() -> None:
    case = make_case(trials=1)
    for name, message in (("pairwise_raises", "ValueError: no opinion"), ("pairwise_bad_value", "'C'")):
        result = compare_pairwise(
            case, sides({0: "a"}, "cand"), sides({0: "b"}, "base"), pairwise_judge(name), LiveSource()
        )
        assert result.pairs == () and result.preference is None and not result.complete
        assert result.errors[0].trial == 0 and message in result.errors[0].message


def test_pairwise_keep_reuses_pairs_with_the_same_identity() -> None:
    judge = pairwise_judge("always_a")
    case = make_case(trials=2)
    cand, base = sides({0: "x", 1: "y"}, "cand"), sides({0: "x", 1: "y"}, "base")
    first = compare_pairwise(case, cand, base, judge, LiveSource()).to_json()
    partial = {**first, "pairs": first["pairs"][:1]}
    before = calls("always_a")
    again = compare_pairwise(case, cand, base, judge, LiveSource(), keep=partial).to_json()
    assert calls("always_a") == before + 2  # only trial 1, both orders
    assert [p["trial"] for p in again["pairs"]] == [0, 1]
    compare_pairwise(case, cand, base, judge, LiveSource(), keep={**first, "identity": "sha256:old"})
    assert calls("always_a") == before + 6


def test_async_pairwise_judge_matches_a_sync_one() -> None:
    case = make_case(trials=3)
    cand = sides({0: "good", 1: "bad", 2: "good"}, "cand")
    base = sides({0: "bad", 1: "good", 2: "bad"}, "base")
    sync = compare_pairwise(case, cand, base, pairwise_judge("prefers_good"), LiveSource()).to_json()
    judge = pairwise_judge("async_prefers_good")
    asynchronous = compare_pairwise(case, cand, base, judge, LiveSource()).to_json()
    assert [p["preference"] for p in asynchronous["pairs"]] == [p["preference"] for p in sync["pairs"]]
    assert (asynchronous["wins"], asynchronous["losses"], asynchronous["preference"]) == (2, 1, "candidate")
    # The sync path runs an async pairwise judge too.
    assert compare_pairwise(case, cand, base, judge, LiveSource()).preference == "candidate"


def test_record_made_with_its_try_and_no_grader_path_without_graders() -> None:
    """grade_trial puts the attempt's try in the record as it makes it; the grader file's path
    only when graders ran (none here: no context's graders)."""
    case = make_case(assertions=[{"type": "contains", "value": "4"}])
    record = grade_trial(view("42", case=case), case, LiveSource(), graders_path="graders/v/c/0.jsonl", try_number=2)
    assert record.try_number == 2 and record.graders_path is None
    assert record.to_json()["try"] == 2 and "gradersPath" not in record.to_json()


def test_grader_values_are_the_live_entries_and_shared_where_their_measurement_is() -> None:
    """The live source settles the defaults straight into the record's values (``GraderValue``,
    no copy per grader); a measurement shared between trials (no tool calls, one request) gives
    one value object to every trial, and each trial's values are still its own."""
    from mst.graders import parse_graders_config
    from mst.runs.grading_records import GraderValue

    def session(tokens: int, duration: int) -> list[dict[str, Any]]:
        usage = {"inputTokens": tokens, "outputTokens": 1}
        return [{"type": "model.request", "data": {"model": "m", **usage}, "provenance": {"phase": "agent"}},
                {"type": "session.result", "data": {"outcome": "completed", "durationMs": duration, "usage": usage},
                 "provenance": {"phase": "agent"}}]

    case = make_case()
    context = GradingContext(graders=parse_graders_config(None))
    source = LiveSource()
    a, b = (grade_trial(view(case=case, transcript=session(t, d), trial=i), case, source, context=context)
            for i, (t, d) in enumerate(((10, 5), (20, 7))))
    assert a.graders is not None and b.graders is not None
    assert all(g.__class__ is GraderValue for g in (*a.graders, *b.graders))
    shared = [x.id for x, y in zip(a.graders, b.graders, strict=True) if x is y]
    assert shared == ["tool-success-rate", "tool-failure-count", "retries", "loops", "trajectory-efficiency",
                      "execution-step-count", "artifact-production"]
    durations = {g.id: g for g in b.graders}["execution-duration"]
    assert (durations.value, durations.message) == (7.0, "7 ms (from session.result)")


def test_a_journaled_grading_with_a_redactor_has_its_grader_entries_redacted_at_every_sight() -> None:
    """Without a redactor the journal's line holds shared grader entries as their encoded bytes
    (``TrialGrading.journal_json``); with one, every entry is a dict the redactor walks, also a
    value seen before (one the defaults share between trials)."""
    import orjson

    from mst.grading.context import GradingContext
    from mst.grading.phase import _redacted
    from mst.runs.grading_records import GraderValue, TrialGrading
    from mst.session.redact import Redactor

    shared = GraderValue("loops", 0.0, "pass", "saw sk-SECRET-1")
    records = [TrialGrading("v", "c", t, graders=(shared,)) for t in range(3)]
    plain = [orjson.dumps(_redacted(r, GradingContext())[1]) for r in records]
    assert all(b"sk-SECRET-1" in line for line in plain)
    context = GradingContext(redactor=Redactor(["sk-SECRET-1"]))
    for record in records:
        stored, data = _redacted(record, context)
        assert b"sk-SECRET-1" not in orjson.dumps(data)
        assert stored.graders is not None and "sk-SECRET-1" not in stored.graders[0].message
