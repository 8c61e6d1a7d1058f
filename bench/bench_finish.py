"""Benchmark: the end of a phase (``api._finish``): summary.json, results.json, comparisons.json,
run.json, then report.html and its trial chunks, on a run already open.

Usage:
  .venv/bin/python bench/bench_harness.py run --attempts 20000 --workdir /dev/shm/mst-bench   # makes the eval
  .venv/bin/mst run /dev/shm/mst-bench/eval-20000/eval.yaml --runs-dir /dev/shm/mst-src
  .venv/bin/python bench/bench_finish.py /dev/shm/mst-src/<id> /dev/shm/mst-bench/eval-20000/eval.yaml \\
      [--rounds 3] [--workdir /dev/shm/mst-finish]

The run is copied to ``--workdir`` and opened once; each round then writes the files again, as
``_finish`` does, and prints its CPU time per attempt (finalize + run.write, and write_report).
Compare revisions with ``PYTHONPATH=<rev>/src`` alternately: the machine is shared. Under
``valgrind --tool=callgrind``, rounds 2 minus rounds 1 is one round's instructions.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from mst.config.resolve import resolve_eval
from mst.report.html import write_report
from mst.runs.run import open_run
from mst.runs.summary import finalize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("eval", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm/mst-finish"))
    args = parser.parse_args()
    work = args.workdir / "run"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(args.run, work)
    run = open_run(work)
    resolved = resolve_eval(args.eval)
    n = len(run.attempts)
    for _ in range(args.rounds):
        t0 = time.process_time()
        finalize(run, resolved)
        run.write()
        t1 = time.process_time()
        write_report(run)
        t2 = time.process_time()
        print(f"finalize {1e6 * (t1 - t0) / n:.1f} µs/attempt  report {1e6 * (t2 - t1) / n:.1f} µs/attempt")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
