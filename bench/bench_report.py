"""Benchmark: writing ``report.html`` (and its trial chunks) for a large run.

Usage:
  .venv/bin/python bench/bench_harness.py run --attempts 20000 --workdir /dev/shm/mst-bench   # makes the run
  .venv/bin/python bench/bench_report.py /dev/shm/mst-bench/eval-20000/runs/<id> [--repeat 5]

Times, in this process, :func:`mst.report.html.write_report` on a run already open (what
``mst run`` and ``mst grade`` pay at the end: the run is in memory then), and opening the run
first (what ``mst report RUN`` adds). Best of ``--repeat``; wall and CPU time (user+sys), since
the machine is shared. Prints the page's size and the chunks' total size and file count.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

from mst.report.html import CHUNKS_DIR, write_report
from mst.runs.run import open_run


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    best_open = best_write = (float("inf"), float("inf"))
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), _cpu()
        run = open_run(args.run)
        opened = (time.perf_counter() - wall, _cpu() - cpu)
        wall, cpu = time.perf_counter(), _cpu()
        write_report(run)
        written = (time.perf_counter() - wall, _cpu() - cpu)
        best_open, best_write = min(best_open, opened), min(best_write, written)
        del run
    attempts = sum(1 for _ in open_run(args.run).attempts)
    files, chunk_bytes = _size(args.run / CHUNKS_DIR)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"attempts {attempts}: write_report {best_write[0]:.2f} s wall, {best_write[1]:.2f} s CPU; "
          f"open_run first {best_open[0]:.2f} s wall, {best_open[1]:.2f} s CPU (best of {args.repeat})")
    print(f"report.html {(args.run / 'report.html').stat().st_size / 1024:.0f} KiB; "
          f"chunks {files} files, {chunk_bytes / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
