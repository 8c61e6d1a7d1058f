"""Results schema v2, grader events, error isolation, determinism, purity."""

from __future__ import annotations

import ast
import builtins
import copy
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from gsession import call, ev, request, result

import mst.graders.results as results_module
from mst.graders import (
    BUILTINS,
    SCHEMA_VERSION,
    GraderRun,
    Measurement,
    create_session_lookups,
    parse_graders_config,
    run_graders,
)
from mst.graders.base import BuiltinGrader
from mst.session.io import dumps_jsonl

SESSION = [ev("user.message", {"content": "hi"}), request(10, 2), *call("1", "a"), result(duration=9)]
RESULT_KEYS = {
    "id",
    "implementation",
    "value",
    "unit",
    "direction",
    "status",
    "threshold",
    "thresholdOutcome",
    "message",
}


def test_result_schema_v2_fields() -> None:
    run = run_graders(SESSION, parse_graders_config(None))
    assert run.manifest["schemaVersion"] == SCHEMA_VERSION == 2
    assert run.results_document() == {"schemaVersion": 2, "results": run.results}
    for r in run.results:
        assert set(r) == RESULT_KEYS
        assert r["status"] in {"pass", "fail", "unavailable", "error"}
        assert r["direction"] in {"higher", "lower"}
        assert r["implementation"] == {"id": f"mst.builtin/{r['id']}", "version": 1}
        assert r["value"] is None or isinstance(r["value"], float)


def test_manifest_is_data_only_and_lists_every_grader() -> None:
    config = parse_graders_config({"loops": {"enabled": False}, "recurrence-rate": {}})
    manifest = run_graders(SESSION, config).manifest
    ids = [g["id"] for g in manifest["graders"]]
    assert "loops" in ids and "recurrence-rate" in ids
    orjson.dumps(manifest)  # plain JSON data


def test_threshold_outcomes_respect_direction() -> None:
    config = parse_graders_config({"execution-duration": {"threshold": 5}, "artifact-production": {"threshold": 1}})
    by = {r["id"]: r for r in run_graders(SESSION, config).results}
    assert (by["execution-duration"]["thresholdOutcome"], by["execution-duration"]["status"]) == ("missed", "fail")
    assert (by["artifact-production"]["thresholdOutcome"], by["artifact-production"]["status"]) == ("missed", "fail")
    assert by["loops"]["thresholdOutcome"] is None and by["loops"]["status"] == "pass"


def test_unavailable_result_has_no_threshold_outcome() -> None:
    config = parse_graders_config({"retries": {"threshold": 0}})
    r = next(r for r in run_graders(SESSION, config).results if r["id"] == "retries")
    assert (r["status"], r["value"], r["thresholdOutcome"]) == ("unavailable", None, None)


def _patch(monkeypatch: pytest.MonkeyPatch, gid: str, fn: Any) -> None:
    patched = dict(BUILTINS)
    g = patched[gid]
    patched[gid] = BuiltinGrader(g.id, g.name, g.description, g.unit, g.direction, fn, g.default,
                                 g.threshold, g.min, g.max, g.config)  # fmt: skip
    monkeypatch.setattr(results_module, "BUILTINS", patched)


def test_a_grader_that_raises_is_an_error_and_others_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_: Any) -> Measurement:
        raise ZeroDivisionError("division by zero")

    _patch(monkeypatch, "loops", boom)
    by = {r["id"]: r for r in run_graders(SESSION, parse_graders_config(None)).results}
    assert by["loops"]["status"] == "error" and by["loops"]["value"] is None
    assert by["loops"]["message"] == "ZeroDivisionError: division by zero"
    assert by["tool-success-rate"]["status"] == "pass"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 1.5])
def test_non_finite_or_out_of_range_values_are_errors(monkeypatch: pytest.MonkeyPatch, bad: float) -> None:
    _patch(monkeypatch, "tool-success-rate", lambda _: Measurement(bad, "bogus"))
    r = run_graders(SESSION, parse_graders_config(None)).results[0]
    assert r["status"] == "error" and r["value"] is None


def test_each_configuration_grades_with_its_own_graders_when_configurations_alternate() -> None:
    """The per-run steps (:class:`results._Plan`) are kept for the configuration graded last: a
    second configuration, and then the first again, must each give exactly their own results."""
    first = parse_graders_config(None)
    second = parse_graders_config({"loops": {"enabled": False}, "execution-duration": {"threshold": 5}})
    expected = {id(c): [(r["id"], r["status"]) for r in run_graders(SESSION, c).results] for c in (first, second)}
    for config in (first, second, first, second):
        assert [(r["id"], r["status"]) for r in run_graders(SESSION, config).results] == expected[id(config)]
    assert "loops" not in dict(expected[id(second)])
    assert dict(expected[id(second)])["execution-duration"] == "fail"


def test_a_grader_with_its_own_configuration_receives_it() -> None:
    """Graders without configuration share one input; one with a configuration of its own gets
    that configuration (here recurrence-rate's ``symbols``), and the others still get none."""
    session = [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 2}), *call("3", "a", {"x": 1}), result(duration=9)]
    def graded(symbols: str) -> dict[str, dict[str, Any]]:
        config = parse_graders_config({"recurrence-rate": {"config": {"symbols": symbols}}})
        return {r["id"]: r for r in run_graders(session, config).results}

    by_name, by_call = graded("tool"), graded("call")
    assert by_name["recurrence-rate"]["value"] != by_call["recurrence-rate"]["value"]
    assert {k: v for k, v in by_name.items() if k != "recurrence-rate"} == \
        {k: v for k, v in by_call.items() if k != "recurrence-rate"}


def test_events_match_persisted_documents() -> None:
    run = run_graders(SESSION, parse_graders_config({"recurrence-rate": {}}))
    events = run.events()
    assert events[0]["type"] == "grader.manifest" and events[0]["data"] == run.manifest
    assert [e["data"] for e in events[1:]] == run.results
    assert all(e["type"] == "grader.result" for e in events[1:])
    assert [e["provenance"]["index"] for e in events] == list(range(len(SESSION), len(SESSION) + len(events)))
    assert {e["provenance"]["phase"] for e in events} == {"grading"}
    # round trip through JSON: the events are what a graded session file would hold
    assert orjson.loads(orjson.dumps(events)) == events


def test_events_jsonl_is_each_event_encoded() -> None:
    """The graded session's grader lines are built from a once-encoded manifest: they must be
    exactly what encoding each event gives, for every trial (manifest shared, indexes not)."""
    config = parse_graders_config({"recurrence-rate": {}})
    for session in (SESSION, SESSION[:2], []):
        run = run_graders(session, config)
        assert run.events_jsonl() == dumps_jsonl(run.events())


def test_events_jsonl_at_any_base_index_encodes_as_each_event_does() -> None:
    """The grader file's lines are assembled from pieces: at any session length (the grader
    events' base index) they are byte for byte what encoding each event gives."""
    run = run_graders(SESSION, parse_graders_config(None))
    for base in (4094, 4095, 4096, 10**6, 4094, *range(200), *range(150)):
        moved = GraderRun(run.manifest, run.results, base)
        assert moved.events_jsonl() == dumps_jsonl(moved.events())


def test_grader_events_do_not_change_a_regrade() -> None:
    config = parse_graders_config(None)
    run = run_graders(SESSION, config)
    again = run_graders([*SESSION, *run.events()], config)
    assert again.results == run.results


def test_determinism() -> None:
    config = parse_graders_config({gid: {} for gid in BUILTINS})
    expected = {"toolCalls": ["a"], "states": ["a"], "objectives": ["a"]}
    first = run_graders(SESSION, config, expected=expected)
    for _ in range(3):
        again = run_graders(copy.deepcopy(SESSION), config, expected=copy.deepcopy(expected))
        assert orjson.dumps(again.results) == orjson.dumps(first.results)
        assert again.manifest == first.manifest


def test_inputs_are_not_mutated() -> None:
    session = copy.deepcopy(SESSION)
    expected = {"toolCalls": [{"name": "a", "arguments": {}}], "objectives": [{"tool": "a"}]}
    before = (copy.deepcopy(session), copy.deepcopy(expected))
    run_graders(session, parse_graders_config({gid: {} for gid in BUILTINS}), expected=expected)
    assert (session, expected) == before


def test_shared_lookups_are_used_when_given() -> None:
    lookups = create_session_lookups(SESSION)
    config = parse_graders_config(None)
    assert run_graders(SESSION, config, lookups=lookups).results == run_graders(SESSION, config).results


def test_pure_graders_do_no_file_process_network_env_or_clock_access(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def forbid(name: str) -> Any:
        def fail(*_: Any, **__: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"grader used {name}")

        return fail

    config = parse_graders_config({gid: {} for gid in BUILTINS})
    session = copy.deepcopy(SESSION)
    for target, name in [
        (builtins, "open"),
        (os, "open"),
        (os, "getenv"),
        (subprocess, "Popen"),
        (socket, "socket"),
        (time, "time"),
        (time, "perf_counter"),
        (time, "monotonic"),
    ]:
        monkeypatch.setattr(target, name, forbid(f"{target.__name__}.{name}"))
    monkeypatch.setattr(os, "environ", _ForbiddenEnv())
    run = run_graders(session, config, expected={"toolCalls": ["a"]})
    monkeypatch.undo()
    assert calls == []
    assert all(r["status"] != "error" for r in run.results)


class _ForbiddenEnv(dict[str, str]):
    def __getitem__(self, key: str) -> str:
        raise AssertionError("grader read the environment")

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError("grader read the environment")


PURE_MODULES = ["base", "builtins", "trajectory", "registry", "results", "config", "experiments"]
ALLOWED_IMPORTS = {"__future__", "collections", "dataclasses", "hashlib", "itertools", "math", "re", "types",
                   "typing", "pathlib", "orjson"}  # fmt: skip


@pytest.mark.parametrize("module", PURE_MODULES)
def test_grader_modules_import_only_session_and_stdlib(module: str) -> None:
    """docs/README.md: graders import only mst.session (and stdlib; orjson via session's own use)."""
    source = Path(results_module.__file__).with_name(f"{module}.py").read_text()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            # mst.statistics is stdlib-only math with no mst imports (checked below), not an engine module
            allowed = ("mst.session", "mst.graders", "mst.statistics")
            assert top in ALLOWED_IMPORTS or name.startswith(allowed), (
                f"{module} imports {name}"
            )


def test_statistics_module_imports_nothing_of_mst() -> None:
    import mst.statistics

    for file in Path(mst.statistics.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("mst") or node.module.startswith("mst.statistics"), node.module
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("mst") for a in node.names)
