"""Benchmark: the custom-grader runtimes (issue 4 speed targets).

Usage:  .venv/bin/python bench/bench_custom_graders.py [--events 10000] [--repeat 15]

1. A trivial custom JavaScript grader (``return session.length``) over a generated session of
   ``--events`` events, timed as the custom phase runs it: the lookups (built once, shared with
   the built-ins, so built outside the timing) serialised with the session, one restricted Node
   process started (prlimit → unshare --net → node with the permission model), the grader run in
   a fresh vm context over frozen copies, its result read back. Target ≤ 150 ms wall.
2. The Bash analysis (tree-sitter parse + checks) of a 64 KiB read-only script. Target ≤ 50 ms.

Reported: median and best wall time of ``--repeat`` runs, and the CPU time of this process plus
its children (the steadier figure when other work shares the machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from mst.graders.custom.bash_check import analyze_shell
from mst.graders.custom.js import JsGrader, isolation_problem, lookups_data, run_js_graders
from mst.session.lookups import create_session_lookups


def session(events: int) -> list[dict[str, Any]]:
    """Tool calls, model requests and messages in a realistic mix."""
    out: list[dict[str, Any]] = []
    for i in range(events):
        kind = i % 5
        prov = {"component": "bench", "phase": "agent", "index": i, "timestampMs": i * 10}
        if kind == 0:
            out.append(
                {
                    "type": "tool.execution_start",
                    "provenance": prov,
                    "data": {"toolCallId": f"c{i}", "toolName": f"tool{i % 7}", "input": {"n": i}},
                }
            )
        elif kind == 1:
            out.append(
                {
                    "type": "tool.execution_complete",
                    "provenance": prov,
                    "data": {"toolCallId": f"c{i - 1}", "success": i % 3 != 0},
                }
            )
        elif kind == 2:
            out.append(
                {"type": "model.request", "provenance": prov, "data": {"inputTokens": 1000 + i, "outputTokens": 50}}
            )
        else:
            out.append({"type": "assistant.message", "provenance": prov, "data": {"content": f"step {i} " * 8}})
    return out


def script_64k() -> str:
    """A 64 KiB read-only script: jq pipelines, [[ ]], case, arithmetic, redirections to stderr."""
    parts = ["#!/usr/bin/env bash", "set -euo pipefail", 'session="$1"', "total=0"]
    i = 0
    while sum(len(p) + 1 for p in parts) < 64 * 1024 - 300:
        parts.append(
            f"count_{i}=$(jq -r 'select(.type == \"tool.execution_complete\") | .data.toolName' "
            f'"$session" | grep -c "tool{i}" || true)'
        )
        parts.append(f'if [[ "$count_{i}" -gt 0 ]]; then total=$((total + count_{i})); fi')
        parts.append(f'case "$count_{i}" in 0) : ;; *) echo "seen {i}" >&2 ;; esac')
        i += 1
    parts.append('echo "[{\\"id\\":\\"total\\",\\"value\\":$total}]"')
    return "\n".join(parts) + "\n"


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(fn: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    fn()  # warm: imports, detection (cached per process), grammar load
    walls, cpus = [], []
    for _ in range(repeat):
        c0, w0 = cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(cpu() - c0)
    return statistics.median(walls) * 1000, min(walls) * 1000, statistics.median(cpus) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    problem = isolation_problem()
    if problem is not None:
        raise SystemExit(f"cannot benchmark custom JavaScript here: {problem}")

    events = session(args.events)
    lookups = create_session_lookups(events)
    grader = JsGrader("trivial", "return session.length", {})

    def js() -> None:
        payload = orjson.dumps({"session": events, "lookups": lookups_data(lookups)})
        result = run_js_graders([grader], payload)["trivial"]
        assert result.value == args.events, result

    source = script_64k()
    assert analyze_shell(source).accepted

    med, best, cpu_ms = measure(js, args.repeat)
    print(
        f"js trivial grader, {args.events} events: median {med:.1f} ms, best {best:.1f} ms wall; "
        f"cpu {cpu_ms:.1f} ms (target ≤ 150 ms wall)"
    )
    med, best, cpu_ms = measure(lambda: analyze_shell(source), args.repeat)
    print(
        f"bash analysis, {len(source.encode())} bytes: median {med:.1f} ms, best {best:.1f} ms wall; "
        f"cpu {cpu_ms:.1f} ms (target ≤ 50 ms)"
    )
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
