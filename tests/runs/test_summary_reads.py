"""The summary reads a field or two of every attempt from its stored JSON, without making an
AttemptRecord (bench/perf16_percase.md, session 10): what it reads must be what the record says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.report.conftest import report_eval

from mst import api, endings
from mst.config.resolve import resolve_eval
from mst.runs.attempts import AttemptRecord, duration_of, usage_of
from mst.runs.compare import PASS_RATE, Columns
from mst.runs.judge_summary import JudgeTally
from mst.runs.run import open_run
from mst.runs.summary import _complete_rate, _variant_cases, finalize
from mst.statistics import CONFIDENCE

_ODD: list[dict[str, Any]] = [
    {"usage": {"inputTokens": 3, "outputTokens": 2}, "durationMs": 12.5},
    {"usage": {"inputTokens": 1, "cache": {"read": 4}, "note": "x"}, "durationMs": True},  # nested, bool
    {"usage": None, "durationMs": 7},
    {"usage": [1, 2]},  # no usage map, no duration
]


def test_the_readers_of_stored_json_agree_with_the_record() -> None:
    for fields in _ODD:
        data = {"variant": "v", "case": "c", "trial": 0, **fields}
        record = AttemptRecord(data)
        assert dict(usage_of(data)) == dict(record.usage) and duration_of(data) == record.duration_ms
    assert duration_of({"durationMs": True}) is None and dict(usage_of({"usage": [1]})) == {}


def test_the_summary_adds_up_usage_and_durations_as_the_records_give_them(tmp_path: Path) -> None:
    eval_path = report_eval(tmp_path)
    run = open_run(api.run_eval(eval_path, runs_dir=tmp_path / "runs").run.paths.root)
    keys = sorted(run.attempts)
    assert len(keys) >= len(_ODD)
    for key, fields in zip(keys, _ODD * len(keys), strict=False):  # every attempt given odd fields
        data = {**run.attempts[key].to_json(), **fields}
        if "durationMs" not in fields:
            data.pop("durationMs", None)
        run.attempts.put(key, AttemptRecord.from_json(data), orjson.dumps(data))
    summary = finalize(run, resolve_eval(eval_path))
    for variant in summary.variants:
        records = [run.attempts[k] for k in keys if k[0] == variant.id and endings.is_trial(run.ending(k))]
        usage: dict[str, float] = {}
        for r in records:
            for name, value in r.usage.items():
                if isinstance(value, int | float):
                    usage[name] = usage.get(name, 0) + value
        durations = [r.duration_ms for r in records if r.duration_ms is not None]
        assert dict(variant.figures["usage"]) == dict(sorted(usage.items()))
        assert variant.figures["meanDurationMs"] == (sum(durations) / len(durations) if durations else None)


def test_every_variant_s_columns_hold_the_eval_s_case_ids_not_a_copy(tmp_path: Path) -> None:
    """Two variants' columns share the eval's id list (8.5 bytes a case each when copied), and
    each case's pass rate is its trials' own, though equal trials work it out once."""
    eval_path = report_eval(tmp_path)
    run = open_run(api.run_eval(eval_path, runs_dir=tmp_path / "runs").run.paths.root)
    resolved = resolve_eval(eval_path)
    assert len(resolved.variants) == 2
    for variant in resolved.variants:
        cases, _, columns = _variant_cases(run, resolved, variant.id, CONFIDENCE, JudgeTally())
        assert columns.case_ids is resolved.cases.ids and len(columns.values[PASS_RATE]) == len(cases)
        for i, trials in enumerate(cases):
            assert columns.value(PASS_RATE, i) == _complete_rate(trials, resolved.config.casePass)


def test_columns_over_known_ids_take_values_in_order_and_leave_the_ids_alone() -> None:
    ids = ["a", "b", "c"]
    columns = Columns.over(ids)
    columns.add_values({PASS_RATE: 1.0, "grader:g": 2})  # an int is held as its float
    columns.add_values({PASS_RATE: None})
    columns.add_values({"grader:g": -0.0, PASS_RATE: 0.5})
    assert ids == ["a", "b", "c"] and columns.case_ids is ids and columns.incomplete() == 1
    got = [columns.values["grader:g"][i] for i in range(3)]
    assert repr(got) == "[2.0, nan, -0.0]" and columns.row_values(0) == {"graders": {"g": 2.0}}
    with pytest.raises(ValueError, match="known ids"):
        columns.add_case("d", {})



def test_values_seen_again_keep_their_codes_and_signs() -> None:
    """add_values reads a seen value's code without Column.append: 0.0 and -0.0 stay two
    values, None is NaN, an int is its float, seen or not."""
    columns = Columns.over([f"c{i}" for i in range(8)])
    for value in (0.0, -0.0, 0.0, -0.0, None, 3, 3.0, None):
        columns.add_values({PASS_RATE: 1.0, "grader:g": value})
    got = list(columns.values["grader:g"])
    assert repr(got) == "[0.0, -0.0, 0.0, -0.0, nan, 3.0, 3.0, nan]"
    assert columns.values["grader:g"]._palette[1:] == [0.0, -0.0, 3.0]

def test_row_values_read_a_column_of_floats_as_one_of_codes() -> None:
    columns = Columns()
    for i in range(300):  # past 256 distinct values: the column holds floats
        columns.add_case(f"c{i}", {PASS_RATE: 1.0, "grader:g": i / 7 if i != 5 else None, "judge:j": -0.0})
    assert columns.values["grader:g"]._codes is None and columns.values["judge:j"]._codes is not None
    assert columns.row_values(299) == {"graders": {"g": 299 / 7}, "judges": {"j": -0.0}}
    assert columns.row_values(5) == {"judges": {"j": -0.0}}
    assert repr(columns.row_values(0)["judges"]["j"]) == "-0.0"
