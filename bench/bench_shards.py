"""Benchmark: grading a CPU-bound run locally vs in shards on the ``process`` runner.

Usage:  .venv/bin/python bench/bench_shards.py [--cases 40] [--trials 2] [--work-ms 150] [--shards 2] [--repeat 3]

An eval of ``--cases`` cases × 2 mock variants × ``--trials`` trials is collected once (not
timed) with the offline mock model. Its judge burns ``--work-ms`` of pure-Python CPU per trial,
so grading is CPU-bound, as an embedding or a local-model judge would be. Timed, each the best
of ``--repeat`` interleaved runs: ``mst grade RUN`` on the coordinator, and ``mst grade RUN --runner process
--runner-option shards=N`` (the library calls the CLI makes, in process, so CLI start-up is in
neither). Reported: both times, the speed-up, and each shard's start (launch to ``hello``, from
run.json ``grading.runner.shards[].helloMs``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import yaml

from mst import api as pipeline

JUDGE = '''
import time

def burn(trial, options):
    end = time.thread_time() + options["ms"] / 1000
    x = 0
    while time.thread_time() < end:
        x += 1
    return trial.answer is not None
'''


def _eval(root: Path, cases: int, trials: int, work_ms: float) -> Path:
    (root / "bench_judges.py").write_text(JUDGE)
    variant = {"client": "agent", "model": "mock", "settings": {"maxTurns": 4, "mock": {}}}
    doc = {"name": "bench-shards", "trials": trials, "concurrency": 8, "seed": 1,
           "cases": [{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(cases)],
           "variants": [{"id": "base", "baseline": True, **variant}, {"id": "cand", **variant}],
           "assertions": [{"type": "equals"}],
           "judges": [{"id": "burn", "code": "bench_judges:burn", "options": {"ms": work_ms}}]}
    path = root / "eval.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _timed(fn: Callable[[], pipeline.Outcome]) -> tuple[float, pipeline.Outcome]:
    start = time.perf_counter()
    outcome = fn()
    return time.perf_counter() - start, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--work-ms", type=float, default=150.0)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mst-bench-shards-") as tmp:
        root = Path(tmp)
        path = _eval(root, args.cases, args.trials, args.work_ms)
        source = pipeline.run_eval(path, runs_dir=root / "runs", no_grade=True).run.paths.root
        options = [f"shards={args.shards}"]
        local, sharded, hello = float("inf"), float("inf"), []
        for _ in range(args.repeat):  # interleaved, best of each: other load on the machine hits both alike
            local = min(local, _timed(lambda: pipeline.grade(source))[0])
            seconds, outcome = _timed(lambda: pipeline.grade(source, runner="process", runner_options=options))
            if seconds < sharded:
                sharded = seconds
                meta = orjson.loads(outcome.run.paths.run_json.read_bytes())
                hello = [s["helloMs"] for s in meta["grading"]["runner"]["shards"]]
    trials = args.cases * 2 * args.trials
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{platform.python_version()}, {sys.platform}; load average {os.getloadavg()[0]:.1f} "
          f"(other processes compete for the cores); {trials} trials × {args.work_ms:g} ms CPU judge")
    print(f"local grade:              {local:7.2f} s")
    print(f"process runner, {args.shards} shards: {sharded:7.2f} s   speed-up {local / sharded:.2f}×")
    print(f"shard start (launch → hello): {', '.join(f'{ms / 1000:.2f} s' for ms in hello)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
