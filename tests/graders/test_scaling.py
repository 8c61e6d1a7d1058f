"""A measurable large-session bound for the default set (docs/graders.md, "Defaults"): linear growth.

The absolute bound (1M events ≤ 2 s) is measured by ``bench/bench_graders.py``; here a cheaper
check guards against accidental super-linear work: quadrupling the session must cost well
under the 16× a quadratic pass would.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from gsession import ev, request, result, rpc

from mst.graders import parse_graders_config, run_graders

DEFAULTS = parse_graders_config(None)


def _session(turns: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for t in range(turns):
        events += [
            request(1000 + t % 50, 20),
            ev("tool.execution_start", {"toolCallId": str(t), "toolName": f"t{t % 5}", "input": {"n": t}}),
            *rpc(t, "srv", "x", {"n": t}),
            ev("tool.execution_complete", {"toolCallId": str(t), "toolName": f"t{t % 5}", "success": True}),
            ev("assistant.message_delta", {"deltaContent": "x"}),
            ev("assistant.message_delta", {"deltaContent": "y"}),
            request(5, 5, phase="judge"),
        ]
    return [*events, result()]


def _cpu_seconds(session: list[dict[str, Any]]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        run = run_graders(session, DEFAULTS)
        best = min(best, time.process_time() - start)
        assert all(r["status"] != "error" for r in run.results)
    return best


@pytest.mark.slow
def test_default_set_scales_linearly() -> None:
    small, large = _session(4_000), _session(16_000)
    ratio = _cpu_seconds(large) / _cpu_seconds(small)
    assert ratio < 8, f"4× the events cost {ratio:.1f}× the time"
