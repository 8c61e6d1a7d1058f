"""Benchmark: the ten default graders over one large unified session.

Usage:  .venv/bin/python bench/bench_graders.py [--events 1000000 2000000] [--repeat 3]

The session is generated in memory (not timed) with a realistic mix per ten events: model
requests, assistant messages, native tool starts and completions, duplicate MCP gateway
JSON-RPC evidence, judge-phase usage that must be excluded, and safe-output results. Timed:
``run_graders`` with the default configuration, which builds the shared lookups once and runs
the ten defaults. Reported: the best of ``--repeat`` runs, and the ratio 2M / 1M.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
from typing import Any

from mst.graders import parse_graders_config, run_graders
from mst.session.lookups import create_session_lookups


def _event(etype: str, data: dict[str, Any], index: int, phase: str = "agent") -> dict[str, Any]:
    return {"type": etype, "data": data, "provenance": {"component": "bench", "phase": phase, "index": index,
                                                         "timestampMs": index * 10}}  # fmt: skip


def make_session(n_events: int) -> list[dict[str, Any]]:
    """``n_events`` events in blocks of ten (one agent turn with two tool calls)."""
    events: list[dict[str, Any]] = []
    turn = 0
    while len(events) < n_events:
        i = len(events)
        tool = f"tool{turn % 7}"
        block = [
            _event("model.request", {"inputTokens": 1000 + turn % 500, "outputTokens": 50, "model": "m"}, i),
            _event("assistant.message", {"content": f"step {turn}"}, i + 1),
            _event("tool.execution_start", {"toolCallId": f"a{turn}", "toolName": tool, "input": {"n": turn}}, i + 2),
            _event("mcp.rpc.request", {"serverName": "srv", "message": {"jsonrpc": "2.0", "id": turn,
                   "method": "tools/call", "params": {"name": "lookup", "arguments": {"q": turn}}}}, i + 3),
            _event("mcp.rpc.response", {"serverName": "srv", "message": {"jsonrpc": "2.0", "id": turn,
                   "result": {"content": []}}}, i + 4),
            _event("tool.execution_start", {"toolCallId": f"b{turn}", "toolName": "lookup",
                   "mcpServerName": "srv", "input": {"q": turn}}, i + 5),
            _event("tool.execution_complete", {"toolCallId": f"b{turn}", "toolName": "lookup",
                   "mcpServerName": "srv", "success": True, "durationMs": 3}, i + 6),
            _event("tool.execution_complete", {"toolCallId": f"a{turn}", "toolName": tool,
                   "success": turn % 13 != 0, "durationMs": 5}, i + 7),
            _event("model.request", {"inputTokens": 300, "outputTokens": 20}, i + 8, phase="judge"),
            _event("safe_output.result", {"kind": "comment"}, i + 9, phase="safe-output")
            if turn % 5 == 0
            else _event("user.message", {"content": "continue"}, i + 9),
        ]  # fmt: skip
        events.extend(block)
        turn += 1
    del events[n_events:]
    events.append(_event("session.result", {"answer": "done", "durationMs": 123456}, n_events))
    return events


def time_once(session: list[dict[str, Any]]) -> tuple[float, float]:
    """(total seconds for run_graders, seconds spent building lookups alone)."""
    config = parse_graders_config(None)
    t0 = time.perf_counter()
    lookups = create_session_lookups(session)
    t1 = time.perf_counter()
    run = run_graders(session, config, lookups=lookups)
    t2 = time.perf_counter()
    assert len(run.results) == 10, run.results
    assert all(r["status"] != "error" for r in run.results), run.results
    return t2 - t0, t1 - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.system()}")
    best: dict[int, float] = {}
    for n in args.events:
        session = make_session(n)
        gc.collect()
        runs = [time_once(session) for _ in range(args.repeat)]
        total, lookups = min(runs)
        best[n] = total
        print(f"{n:>10,} events: total {total:.3f} s (lookups {lookups:.3f} s, graders {total - lookups:.3f} s)")
        del session
        gc.collect()
    if 1_000_000 in best and 2_000_000 in best:
        ratio = best[2_000_000] / best[1_000_000]
        print(f"ratio 2M/1M: {ratio:.2f} (bound 2.2); 1M bound 2 s: {'ok' if best[1_000_000] <= 2 else 'EXCEEDED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
