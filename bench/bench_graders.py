"""Benchmark: the ten default graders over one large unified session.

Usage:  .venv/bin/python bench/bench_graders.py [--events 1000000 2000000] [--repeat 3] [--mix realistic]
        .venv/bin/python bench/bench_graders.py --end-to-end [--events 1000000 2000000] [--repeat 3]
        .venv/bin/python bench/bench_graders.py --trial-transcripts RUN_DIR [--repeat 3]

The session is generated in memory (not timed). ``--mix realistic`` (default) repeats a
20-event streamed agent turn: a user message, a model request, eight message deltas, an
assistant message, two tool calls (one also logged by the MCP gateway as a JSON-RPC exchange),
a judge-phase model request that must be excluded, reasoning, and a safe output every fifth
turn. ``--mix tool-heavy`` packs the same kinds of evidence into 10-event turns (80% of events
need interpreting), a deliberately pessimistic case. Timed:
``run_graders`` with the default configuration, which builds the shared lookups once and runs
the ten defaults. Reported: the best of ``--repeat`` runs, and the ratio 2M / 1M.

``--end-to-end`` writes the session as JSONL to tmpfs (``--workdir``, default a directory under
/dev/shm) and times what a user waits for: ``mst graders run FILE --json`` as a child process
pinned to one core, from process start to exit (parsing, lookups, graders, printing). Each run
is started by a small fresh measuring process, so the child's peak RSS is its own (Linux counts
a big parent's peak into a child's ``ru_maxrss``). Reported: wall, CPU and peak RSS, and the
peak as a multiple of the file's size.

``--trial-transcripts RUN_DIR`` times what every trial of ``mst run`` / ``mst grade`` pays:
building the lookups of each small stored session of a run (``RUN_DIR/transcripts``, e.g. one
``bench_harness.py run`` wrote), in process, the sessions decoded first (not timed). Reported:
microseconds per session, the best of ``--repeat`` passes over up to 2,000 of them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from mst.graders import parse_graders_config, run_graders
from mst.session.lookups import create_session_lookups


def _event(etype: str, data: dict[str, Any], index: int, phase: str = "agent") -> dict[str, Any]:
    return {"type": etype, "data": data, "provenance": {"component": "bench", "phase": phase, "index": index,
                                                         "timestampMs": index * 10}}  # fmt: skip


def _tool_heavy_turn(turn: int, i: int) -> list[dict[str, Any]]:
    """Ten events, eight of which the lookups must interpret (a worst case, not a typical one)."""
    tool = f"tool{turn % 7}"
    return [
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


def _realistic_turn(turn: int, i: int) -> list[dict[str, Any]]:
    """Twenty events: one streamed agent turn with two tool calls (one through the MCP gateway,
    logged twice), a judge request that must be excluded, and an occasional safe output."""
    tool = f"tool{turn % 7}"
    deltas = [_event("assistant.message_delta", {"deltaContent": f"tok{k}"}, i + 2 + k) for k in range(8)]
    return [
        _event("user.message", {"content": "continue"}, i),
        _event("model.request", {"inputTokens": 1000 + turn % 500, "outputTokens": 50, "model": "m"}, i + 1),
        *deltas,
        _event("assistant.message", {"content": f"step {turn}"}, i + 10),
        _event("tool.execution_start", {"toolCallId": f"b{turn}", "toolName": "lookup",
               "mcpServerName": "srv", "input": {"q": turn}}, i + 11),
        _event("mcp.rpc.request", {"serverName": "srv", "message": {"jsonrpc": "2.0", "id": turn,
               "method": "tools/call", "params": {"name": "lookup", "arguments": {"q": turn}}}}, i + 12),
        _event("mcp.rpc.response", {"serverName": "srv", "message": {"jsonrpc": "2.0", "id": turn,
               "result": {"content": []}}}, i + 13),
        _event("tool.execution_complete", {"toolCallId": f"b{turn}", "toolName": "lookup",
               "mcpServerName": "srv", "success": True, "durationMs": 3}, i + 14),
        _event("tool.execution_start", {"toolCallId": f"a{turn}", "toolName": tool, "input": {"n": turn}}, i + 15),
        _event("tool.execution_complete", {"toolCallId": f"a{turn}", "toolName": tool,
               "success": turn % 13 != 0, "durationMs": 5}, i + 16),
        _event("model.request", {"inputTokens": 300, "outputTokens": 20}, i + 17, phase="judge"),
        _event("assistant.reasoning", {"content": "thinking"}, i + 18),
        _event("safe_output.result", {"kind": "comment"}, i + 19, phase="safe-output")
        if turn % 5 == 0
        else _event("session.info", {"message": "ok"}, i + 19),
    ]  # fmt: skip


MIXES = {"realistic": _realistic_turn, "tool-heavy": _tool_heavy_turn}


def make_session(n_events: int, mix: str = "realistic") -> list[dict[str, Any]]:
    """``n_events`` events of whole turns of the given mix, then the agent's ``session.result``."""
    turn_of = MIXES[mix]
    events: list[dict[str, Any]] = []
    turn = 0
    while len(events) < n_events:
        events.extend(turn_of(turn, len(events)))
        turn += 1
    del events[n_events:]
    events.append(_event("session.result", {"answer": "done", "durationMs": 123456}, n_events))
    return events


def time_once(session: list[dict[str, Any]]) -> tuple[float, float, float]:
    """(wall seconds for lookups + the ten defaults, wall seconds for the lookups alone, CPU
    seconds for both). CPU time is reported too because a shared machine's load inflates wall
    time: it shows the work itself."""
    config = parse_graders_config(None)
    c0 = time.process_time()
    t0 = time.perf_counter()
    lookups = create_session_lookups(session)
    t1 = time.perf_counter()
    run = run_graders(session, config, lookups=lookups)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    assert len(run.results) == 10, run.results
    assert all(r["status"] != "error" for r in run.results), run.results
    return t2 - t0, t1 - t0, cpu


MST = str(Path(sys.executable).parent / "mst")

_MEASURE = """\
import json, resource, subprocess, sys, time
argv = json.loads(sys.argv[1])
t0 = time.perf_counter()
p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                  "rss_mib": ru.ru_maxrss / 1024, "stderr": p.stderr.decode()[-2000:]}))
"""


def measure_child(argv: list[str]) -> dict[str, Any]:
    """Wall, CPU and peak RSS of ``argv`` run by a small fresh process (one child per measurement)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps(argv)], check=True,
                         stdout=subprocess.PIPE).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(out)
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result['rc']}):\n{result['stderr']}")
    return result


def write_session(path: Path, n_events: int, mix: str) -> int:
    """The benchmark session as JSONL (one event per line, as mst writes transcripts); its size."""
    newline = orjson.OPT_APPEND_NEWLINE
    with open(path, "wb") as fh:
        for event in make_session(n_events, mix):
            fh.write(orjson.dumps(event, option=newline))
    return path.stat().st_size


def end_to_end(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mst-bench-graders-", dir="/dev/shm"))
    work.mkdir(parents=True, exist_ok=True)
    best: dict[int, dict[str, Any]] = {}
    try:
        for n in args.events:
            path = work / f"session-{n}.jsonl"
            size = write_session(path, n, args.mix)
            runs = [measure_child([*pin, MST, "graders", "run", str(path), "--json"]) for _ in range(args.repeat)]
            best[n] = min(runs, key=lambda r: r["cpu"])
            peak = max(r["rss_mib"] for r in runs)
            r = best[n]
            print(f"{n:>10,} events ({size / 2**20:.0f} MiB): wall {r['wall']:.3f} s, cpu {r['cpu']:.3f} s, "
                  f"peak RSS {peak:.0f} MiB = {peak * 2**20 / size:.2f}× the file", flush=True)  # fmt: skip
            path.unlink()
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if 1_000_000 in best and 2_000_000 in best:
        one, two = best[1_000_000], best[2_000_000]
        print(f"2M/1M: wall {two['wall'] / one['wall']:.2f}, cpu {two['cpu'] / one['cpu']:.2f} (bound 2.1); "
              f"1M within 3 s: {'ok' if one['wall'] <= 3 else 'EXCEEDED'}")  # fmt: skip
    return best


def trial_lookups(run_dir: Path, repeat: int) -> float:
    """Microseconds per ``create_session_lookups`` over a run's stored transcripts (best pass)."""
    from mst.session.io import read_transcript

    files = sorted((run_dir / "transcripts").glob("*/*/*.jsonl"))[:2000]
    if not files:
        raise SystemExit(f"no transcripts under {run_dir / 'transcripts'}")
    sessions = [read_transcript(f) for f in files]
    passes = max(1, 20_000 // len(sessions))
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        for _ in range(passes):
            for session in sessions:
                create_session_lookups(session)
        best = min(best, time.process_time() - c0)
    per = best / (passes * len(sessions)) * 1e6
    events = sum(map(len, sessions)) / len(sessions)
    print(f"{len(sessions):,} stored sessions ({events:.1f} events each): {per:.2f} µs CPU per create_session_lookups")
    return per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    parser.add_argument("--end-to-end", action="store_true", help="time `mst graders run` on a JSONL file")
    parser.add_argument("--workdir", type=Path, help="--end-to-end: write the session files here")
    parser.add_argument("--trial-transcripts", type=Path, metavar="RUN_DIR",
                        help="time the lookups of each stored session of a run instead")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {load:.2f}; mix {args.mix}; best of {args.repeat}")  # fmt: skip
    if args.trial_transcripts is not None:
        trial_lookups(args.trial_transcripts, args.repeat)
        return 0
    if args.end_to_end:
        end_to_end(args)
        return 0
    best: dict[int, tuple[float, float, float]] = {}
    for n in args.events:
        session = make_session(n, args.mix)
        gc.collect()
        best[n] = min(time_once(session) for _ in range(args.repeat))
        total, lookups, cpu = best[n]
        print(f"{n:>10,} events: wall {total:.3f} s (lookups {lookups:.3f} s, graders {total - lookups:.3f} s), "
              f"cpu {cpu:.3f} s")  # fmt: skip
        del session
        gc.collect()
    if 1_000_000 in best and 2_000_000 in best:
        ratio = best[2_000_000][0] / best[1_000_000][0]
        cpu_ratio = best[2_000_000][2] / best[1_000_000][2]
        verdict = "ok" if best[1_000_000][0] <= 2 else "EXCEEDED"
        print(f"2M/1M: wall {ratio:.2f}, cpu {cpu_ratio:.2f} (bound 2.2); 1M within 2 s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
