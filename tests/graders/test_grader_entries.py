"""A trial's grader entries made straight from the built-ins (``grader_entries``) are exactly
what :func:`record_entries` keeps of the result dicts (bench/perf16_gfile.md, session 9 (gshare))."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gsession import call, ev, request, result

import mst.graders.results as results_module
from mst.graders import BUILTINS, Measurement, create_session_lookups, parse_graders_config
from mst.graders.base import BuiltinGrader
from mst.graders.results import build_manifest, grader_entries, grader_results, record_entries
from mst.grading.judges import TrialView
from mst.grading.sources import GradersOutcome, LiveSource
from mst.session.io import dumps_jsonl

SESSIONS = [
    [ev("user.message", {"content": "hi"}), request(10, 2), *call("1", "a"), result(duration=9)],
    [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 1}), *call("3", "b"), result(duration=90_000)],
    [ev("user.message", {"content": "no calls"})],
    [],
]
CONFIGS = [
    None,
    {"loops": {"enabled": False}, "execution-duration": {"threshold": 5}},
    {"execution-duration": {"threshold": 5.0}, "tool-success-rate": {"threshold": 1}},
    {"recurrence-rate": {"config": {"symbols": "call"}}},
]


def _patch(monkeypatch: pytest.MonkeyPatch, gid: str, fn: Any) -> None:
    patched = dict(BUILTINS)
    g = patched[gid]
    patched[gid] = BuiltinGrader(g.id, g.name, g.description, g.unit, g.direction, fn, g.default,
                                 g.threshold, g.min, g.max, g.config)  # fmt: skip
    monkeypatch.setattr(results_module, "BUILTINS", patched)


def _both(session: list[dict[str, Any]], config: Any, manifest: dict[str, Any] | None = None) -> tuple[Any, Any]:
    manifest = manifest if manifest is not None else build_manifest(config)
    lookups = create_session_lookups(session)
    fast = grader_entries(session, config, manifest, expected="42", lookups=lookups)
    slow = record_entries(manifest, grader_results(session, config, expected="42", lookups=lookups))
    return fast, slow


@pytest.mark.parametrize("raw", CONFIGS)
@pytest.mark.parametrize("session", SESSIONS)
def test_entries_are_those_of_the_results(raw: Any, session: list[dict[str, Any]]) -> None:
    fast, slow = _both(session, parse_graders_config(raw))
    assert fast == slow
    assert [e[0].__class__ for e in fast] == [e[0].__class__ for e in slow]
    assert [(e[1].__class__, e[2], e[3].__class__) for e in fast] == [(e[1].__class__, e[2], e[3].__class__)
                                                                       for e in slow]


@pytest.mark.parametrize("measured", [
    "raise", Measurement(float("nan"), "x"), Measurement(float("inf"), ""), Measurement(-1.0, "neg"),
    Measurement(1.5, "big"), Measurement(None, "no value"), Measurement(0.5, 7), Measurement(1.0, ""),
])
def test_errors_odd_values_and_odd_messages_give_the_same_entries(monkeypatch: pytest.MonkeyPatch,
                                                                   measured: Any) -> None:
    def grader(_: Any) -> Measurement:
        if measured == "raise":
            raise ZeroDivisionError("division by zero")
        return measured  # type: ignore[no-any-return]

    _patch(monkeypatch, "tool-success-rate", grader)
    for raw in CONFIGS:
        fast, slow = _both(SESSIONS[0], parse_graders_config(raw))
        assert fast == slow


def test_a_manifest_that_does_not_imply_the_results_keeps_them_whole() -> None:
    """Graded against another configuration's manifest (its threshold differs), every result of
    a grader the manifest does not imply is kept whole, as record_entries keeps it."""
    config = parse_graders_config({"execution-duration": {"threshold": 5}})
    other = build_manifest(parse_graders_config({"execution-duration": {"threshold": 7}}))
    fast, slow = _both(SESSIONS[0], config, other)
    assert fast == slow
    whole = [e for e in fast if e[4] is not None]
    assert [e[0] for e in whole] == ["execution-duration"] and "result" in whole[0][4]


def test_custom_graders_go_through_the_results() -> None:
    config = parse_graders_config({"my-metric": {"script": "return 1", "unit": "count", "direction": "lower"}})
    assert grader_entries(SESSIONS[0], config, build_manifest(config)) is None


def test_the_live_source_makes_no_result_dict_and_its_results_rebuild_exactly(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The live source grades built-ins without a result dict per grader (``_filled`` is never
    called); the dicts a shard's recording asks for are rebuilt equal to grader_results'."""
    session = SESSIONS[1]
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(dumps_jsonl(session))
    config = parse_graders_config(None)
    manifest = build_manifest(config)
    expected = grader_results(session, config, expected="42")
    trial = TrialView(variant="v", case_id="c", trial=0, answer="42", ending={"kind": "trial"},
                      transcript=transcript, expected="42")

    def no_dict(*_: Any) -> dict[str, Any]:
        raise AssertionError("a result dict was made")

    monkeypatch.setattr(results_module, "_filled", no_dict)
    outcome = LiveSource().graders(trial, config, trial.events, manifest)
    assert outcome.entries is not None and outcome.error is None
    assert outcome.entries == tuple(record_entries(manifest, expected))
    assert outcome.results == tuple(expected)
    assert [list(r) for r in outcome.results] == [list(r) for r in expected]  # the schema's key order
    assert outcome == GradersOutcome(tuple(expected))


def test_a_shared_measurement_gives_the_same_entry_and_any_order_of_trials_the_same_entries() -> None:
    """A measurement the defaults share (no tool calls, no MCP events, one request, no
    artifacts) gives the very entry it gave last, so it is settled once, not per trial; trials
    graded in any order, each kind after the others, still give exactly their own entries."""
    config = parse_graders_config(None)
    manifest = build_manifest(config)
    plain = [request(10, 2), result(duration=9)]
    first = grader_entries(plain, config, manifest)
    again = grader_entries([request(7, 3), result(duration=4)], config, manifest)
    assert first is not None and again is not None
    shared = {"tool-success-rate", "tool-failure-count", "retries", "loops", "trajectory-efficiency",
              "execution-step-count", "artifact-production"}
    assert {a[0] for a, b in zip(first, again, strict=True) if a is b} == shared
    for order in ([*SESSIONS, plain, *SESSIONS], [plain, SESSIONS[1], plain, SESSIONS[0], SESSIONS[2], plain]):
        for session in order:
            fast, slow = _both(session, config, manifest)
            assert fast == slow


def test_step_counts_are_measured_once_per_count_and_source() -> None:
    from mst.graders.base import GraderInput
    from mst.graders.builtins import _STEPS, _STEPS_KEPT, execution_step_count

    def measure(requests: int) -> Measurement:
        session = [request(1, 1) for _ in range(requests)]
        return execution_step_count(GraderInput(session, create_session_lookups(session), {}, None))

    assert measure(3) is measure(3)
    assert measure(3) == Measurement(3.0, "3 model requests (from model.request)")
    assert measure(4) is not measure(3) and measure(4).value == 4.0
    assert len(_STEPS) <= _STEPS_KEPT


def test_the_live_source_runs_no_import_statement_per_trial(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An import statement in the per-trial path costs ~8 k instructions even when the module is
    loaded (bench/perf16_gcompute.md, session 13): the live source's graders import none."""
    import builtins

    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(dumps_jsonl(SESSIONS[0]))
    config = parse_graders_config(None)
    manifest = build_manifest(config)
    trial = TrialView(variant="v", case_id="c", trial=0, answer="42", ending={"kind": "trial"},
                      transcript=transcript, expected="42")
    source = LiveSource()
    source.graders(trial, config, trial.events, manifest)  # anything first use loads is loaded
    imported: list[str] = []
    real = builtins.__import__

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", counting)
    outcome = source.graders(trial, config, trial.events, manifest)
    monkeypatch.undo()
    assert imported == [] and outcome.entries is not None
