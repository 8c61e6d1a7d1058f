"""The summary reads a field or two of every attempt from its stored JSON, without making an
AttemptRecord (bench/perf16_percase.md, session 10): what it reads must be what the record says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from tests.report.conftest import report_eval

from mst import api, endings
from mst.config.resolve import resolve_eval
from mst.runs.attempts import AttemptRecord, duration_of, usage_of
from mst.runs.run import open_run
from mst.runs.summary import finalize

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
