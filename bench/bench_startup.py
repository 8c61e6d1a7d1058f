"""Benchmark: the fixed cost of `mst` — a 1-case `mst run` and `mst --version` (issue 16).

Usage:
  .venv/bin/python bench/bench_startup.py [--repeat 10] [--workdir /dev/shm/startup-one] [--importtime]

Writes ``WORKDIR/eval.yaml``: one case, one ``agent`` variant on the built-in ``mock`` model, a
``final-answer`` assertion and the default graders, no MCP server. Then times, ``--repeat``
times each, ``mst run WORKDIR/eval.yaml --runs-dir WORKDIR/runs --json`` and ``mst --version``
as child processes pinned to core 0, from process start to exit, and prints CPU time (user +
sys, ``getrusage(RUSAGE_CHILDREN)``) beside wall time: best and median. The target is ≤ 0.3 s
of CPU for the run.

Byte-compiled files are what an installed mst runs from, so the children run without
``PYTHONDONTWRITEBYTECODE`` (one untimed run first writes the ``__pycache__`` files). With
``--importtime``, one more run under ``python -X importtime`` prints the modules whose import
took longest (self time, in ms), summed per package.

For old against new in the same minutes, use the same eval with ``bench/compare_rev.sh``:
``env -u PYTHONDONTWRITEBYTECODE bench/compare_rev.sh REV 5 -- run WORKDIR/eval.yaml``
``--runs-dir WORKDIR/runs-ab --json``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import MST, _pinned, measure_child

EVAL_YAML = """\
name: startup-one
trials: 1
seed: 3
variants:
  - id: baseline
    client: agent
    model: mock
cases:
  - id: one
    prompt: What is 1 plus 1?
    expected: "2"
assertions:
  - type: final-answer
"""


def make_eval(work: Path) -> Path:
    """The 1-case eval: no judges, default graders (``graders`` omitted), no MCP server."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "eval.yaml"
    path.write_text(EVAL_YAML)
    return path


def _timed(argv: list[str], work: Path, runs: Path | None, repeat: int) -> list[dict[str, float]]:
    out = []
    for _ in range(repeat):
        if runs is not None:
            shutil.rmtree(runs, ignore_errors=True)
        out.append(measure_child(_pinned(argv), work))
    return out


def _report(what: str, results: list[dict[str, float]]) -> None:
    cpu = sorted(r["cpu"] for r in results)
    wall = sorted(r["wall"] for r in results)
    rss = max(r["rss_mib"] for r in results)
    print(f"{what}: CPU best {cpu[0]:.3f} s, median {statistics.median(cpu):.3f} s; "
          f"wall best {wall[0]:.3f} s, median {statistics.median(wall):.3f} s; peak RSS {rss:.1f} MiB "
          f"({len(results)} runs)")
    print("  CPU each: " + " ".join(f"{r['cpu']:.3f}" for r in results))


def importtime(argv: list[str], work: Path, top: int = 25) -> None:
    """One run under ``-X importtime``: import self time summed per package, largest first."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "mst", *argv[1:]], cwd=work,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    per: collections.Counter[str] = collections.Counter()
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| (\s*)(\S+)", line)
        if m:
            parts = m.group(3).split(".")
            per[".".join(parts[:2]) if parts[0] == "mst" else parts[0]] += int(m.group(1))
    print(f"imports: {sum(per.values()) / 1000:.1f} ms self time in all (importtime adds its own cost)")
    for name, us in per.most_common(top):
        print(f"  {us / 1000:7.1f} ms  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm/startup-one"))
    parser.add_argument("--importtime", action="store_true", help="also print a -X importtime summary")
    args = parser.parse_args(argv)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the children run from byte-compiled files
    eval_path = make_eval(args.workdir)
    runs = args.workdir / "runs"
    run_argv = [MST, "run", str(eval_path), "--runs-dir", str(runs), "--json"]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    _timed(run_argv, args.workdir, runs, 1)  # writes __pycache__; not counted
    _report("mst run (1 case)", _timed(run_argv, args.workdir, runs, args.repeat))
    _report("mst --version", _timed([MST, "--version"], args.workdir, None, args.repeat))
    if args.importtime:
        shutil.rmtree(runs, ignore_errors=True)
        importtime(run_argv, args.workdir)
    shutil.rmtree(runs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
