"""The grading context's per-case data: names and identities shared between cases (issue 16)."""

from __future__ import annotations

import pytest
from tests.grading.grading_helpers import make_case, task_decodes

from mst.config.resolved import ResolvedCase, ResolvedEval
from mst.grading.context import CasePlan, GradingContext, judge_sets


def test_cases_of_the_same_assertions_share_their_names_and_identities() -> None:
    first = make_case(assertions=[{"type": "contains", "value": "4"}, {"type": "contains", "value": "2"}])
    second = ResolvedCase("c2", "other", None, {}, 1, first.assertions, first.judges)  # shared, as resolved
    context = GradingContext()
    one, two = context.plan(first), context.plan(second)
    assert [n for n, _, _ in one.assertions] == ["contains", "contains#2"]
    assert one.assertions is two.assertions and one.judges is two.judges
    assert (one.view.id, two.view.id, two.view.prompt) == ("c1", "c2", "other")
    assert context.plan(second) is two  # asked again by the same trial: the same plan
    assert one.names() == CasePlan.of(first).names() and context.plan(first).view.id == "c1"


def test_a_plan_decodes_its_case_only_when_a_judge_reads_its_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grading a trial of assertions and graders alone decodes the case's task once (the trial's
    view), not a second time for a case view no judge reads; read, the view is made once."""
    from mst.grading.grade import grade_trial
    from mst.grading.judges import TrialView
    from mst.grading.sources import LiveSource

    case = make_case(assertions=[{"type": "contains", "value": "42"}], expected="42")
    decodes = task_decodes(monkeypatch)
    context = GradingContext()
    trial = TrialView.of(case, variant="v", trial=0, answer="42", ending={"kind": "trial"}, transcript=None)
    grading = grade_trial(trial, case, LiveSource(None), context=context)
    assert grading.status == "graded" and len(decodes) == 1  # the trial view's own
    view = context.plan(case).view
    assert (view.id, view.prompt, view.expected, view.metadata) == ("c1", "What is 6*7?", "42", {"topic": "math"})
    assert context.plan(case).view is view and len(decodes) == 2


def test_judge_sets_share_one_list_between_cases_of_the_same_judges() -> None:
    first = make_case()
    cases = (first, ResolvedCase("c2", "p", None, {}, 1, (), first.judges))
    resolved = ResolvedEval.__new__(ResolvedEval)
    object.__setattr__(resolved, "cases", cases)
    object.__setattr__(resolved, "pairwise", None)
    sets = judge_sets(resolved)
    assert sets == {"c1": [], "c2": []} and sets["c1"] is sets["c2"]


def test_a_resolved_case_keeps_its_task_as_bytes_and_reads_back_the_same_values() -> None:
    import pickle
    from datetime import date

    case = ResolvedCase("c1", "What is 6*7?", {"answer": 42, "alts": [1.5, True, None]}, {"topic": "math"}, 2, (), ())
    assert type(case._task) is bytes
    assert (case.prompt, case.expected, case.metadata) == ("What is 6*7?", {"answer": 42, "alts": [1.5, True, None]},
                                                            {"topic": "math"})
    case.metadata["topic"] = "changed"  # a reader's copy: the case itself is unchanged
    assert case.metadata == {"topic": "math"} and pickle.loads(pickle.dumps(case)) == case
    odd = ResolvedCase("c2", "p", (1, 2), {"when": date(2026, 1, 2)}, 1, (), ())  # no JSON round trip: kept as is
    assert odd.expected == (1, 2) and odd.metadata == {"when": date(2026, 1, 2)} and odd != case
    try:
        case.trials = 3  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a resolved case must be immutable")
