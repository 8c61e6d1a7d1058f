"""CPU cost of MCP servers per run, by server lifetime: 200 attempts against server-everything.

Each configuration runs in a fresh worker process that collects the attempts in-process (the
collector `mst run` uses, ``model: mock``, concurrency 4) and reports the CPU it spent — its own
(``getrusage(RUSAGE_SELF)``) plus that of the server processes it started and reaped
(``RUSAGE_CHILDREN``) — around the collection alone, so interpreter start-up is not counted.
Importing the ``mcp`` SDK (which only a variant with servers needs) is reported on its own line.

Configurations, same cases, same mock script:

- ``none``: the variant has no MCP server;
- ``variant``: server-everything over stdio with ``lifetime: variant`` (one instance, shared by
  the worker's concurrent attempts);
- ``attempt``: the same with ``lifetime: attempt`` (a fresh server per attempt, the next pre-started).

With ``--tool-call`` every attempt calls server-everything's ``echo`` once (rejected unheard when
the variant has no server). The server comes from the test tool cache (``tests/realtools.py``).

    .venv/bin/python bench/bench_mcp_lifetime.py [--attempts 200[,2000]] [--concurrency 4] [--tool-call]
        [--repeat 3] [--configs none,variant,attempt]

With two attempt counts (``--attempts 200,2000``) it also splits each configuration's CPU into a
fixed part (server start and stop, first-use imports) and a marginal cost per attempt, from the
difference between the two runs: ``(cpu[2000] - cpu[200]) / 1800``.

Figures: ``bench/mcp_lifetime.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("none", "variant", "attempt")


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _eval(config: str, attempts: int, concurrency: int, tool_call: bool, server: str) -> dict[str, Any]:
    steps = [{"tool": "echo", "args": {"message": "hi"}}] if tool_call else []
    variant: dict[str, Any] = {"id": "v", "model": "mock", "settings": {"mock": {"steps": steps, "answer": "ok"}}}
    if config != "none":
        variant["mcpServers"] = {"e": {"command": server, "args": ["stdio"], "lifetime": config}}
    return {"name": "bench-mcp", "trials": attempts, "concurrency": concurrency, "deadlineSeconds": 120,
            "variants": [variant], "cases": [{"id": "c1", "prompt": "say ok", "expected": "ok"}]}


def worker(config: str, attempts: int, concurrency: int, tool_call: bool, server: str) -> dict[str, Any]:
    from mst.collect import Collector, all_attempts
    from mst.config.resolve import resolve_eval
    from mst.session.redact import Redactor

    t0 = _cpu()
    if config != "none":
        import mcp  # noqa: F401  (paid once per process by any variant with MCP servers)
    import_cpu = _cpu() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "eval.yaml"
        path.write_text(yaml.safe_dump(_eval(config, attempts, concurrency, tool_call, server)))
        resolved = resolve_eval(path)
        records: list[dict[str, Any]] = []
        collector = Collector(resolved, Path(tmp) / "run", secrets={}, redactor=Redactor(),
                              on_attempt=records.append)
        cpu0, wall0 = _cpu(), time.monotonic()
        asyncio.run(collector.run(all_attempts(resolved)))
        cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    ok = sum(r["ending"] == {"kind": "trial", "outcome": "completed"} for r in records)
    return {"config": config, "attempts": len(records), "completed": ok, "cpu": cpu, "wall": wall,
            "importCpu": import_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", default="200", help="a count, or two (200,2000) to split fixed from marginal")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--tool-call", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, from: " + ", ".join(CONFIGS))
    parser.add_argument("--worker", choices=CONFIGS)
    parser.add_argument("--server")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, int(args.attempts), args.concurrency, args.tool_call, args.server)))
        return
    sys.path.insert(0, str(ROOT))
    from tests.realtools import tool

    server = str(tool("server-everything"))
    configs = [c for c in args.configs.split(",") if c]
    assert "none" in configs and set(configs) <= set(CONFIGS), f"--configs must include none, from {CONFIGS}"
    counts = [int(n) for n in str(args.attempts).split(",")]
    best: dict[tuple[int, str], dict[str, Any]] = {}
    for attempts in counts:
        results: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
        for _ in range(args.repeat):
            for config in configs:  # interleaved, so a drift in the machine's speed hits all alike
                argv = [sys.executable, __file__, "--worker", config, "--attempts", str(attempts),
                        "--concurrency", str(args.concurrency), "--server", server]
                if args.tool_call:
                    argv.append("--tool-call")
                done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
                results[config].append(json.loads(done.stdout.strip().splitlines()[-1]))
        _table(attempts, args, results)
        for config, runs in results.items():
            best[(attempts, config)] = min(runs, key=lambda r: r["cpu"])
    if len(counts) == 2:
        low, high = counts
        print(f"split from {low} and {high} attempts: fixed CPU s, marginal ms/attempt")
        for config in configs:
            marginal = (best[(high, config)]["cpu"] - best[(low, config)]["cpu"]) / (high - low)
            fixed = best[(low, config)]["cpu"] - low * marginal
            print(f"{config:<8} fixed {fixed:>7.3f} s   marginal {marginal * 1000:>6.3f} ms/attempt")


def _table(attempts: int, args: argparse.Namespace, results: dict[str, list[dict[str, Any]]]) -> None:
    base = min(r["cpu"] for r in results["none"])
    print(f"{attempts} attempts, concurrency {args.concurrency}, "
          f"{'one echo call' if args.tool_call else 'no tool call'} per attempt")
    print(f"{'config':<8} {'CPU s (best)':>12} {'vs none':>9} {'ms/attempt':>11} {'wall s':>7} {'import mcp s':>13}"
          f" {'all runs':>20}")
    for config, runs in results.items():
        best = min(runs, key=lambda r: r["cpu"])
        assert best["completed"] == attempts, best
        extra = (best["cpu"] / base - 1) * 100 if config != "none" else 0.0
        every = " ".join(f"{r['cpu']:.3f}" for r in runs)
        print(f"{config:<8} {best['cpu']:>12.3f} {extra:>+8.1f}% {best['cpu'] / attempts * 1000:>11.2f} "
              f"{best['wall']:>7.2f} {best['importCpu']:>13.3f} {every:>20}")


if __name__ == "__main__":
    main()
