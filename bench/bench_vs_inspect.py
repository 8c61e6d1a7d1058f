"""Benchmark: mst and Inspect AI side by side on the same work.

Usage:
  .venv/bin/python bench/bench_vs_inspect.py [--samples 2000 20000] [--rounds 2]
      [--inspect-venv /dev/shm/inspect-venv] [--workdir DIR] [--no-graders]
  .venv/bin/python bench/bench_vs_inspect.py --write-evals DIR [--samples 2000 6000] [--no-graders]

``--write-evals DIR`` only writes the mst eval of each N to ``DIR/n-<N>/eval.yaml`` (its dataset
beside it) and exits: no Inspect, nothing run. It is the work the ratio measures, for counting
mst's instructions (``bench/callgrind_count.sh``) or profiling it alone.

The work: N samples, one mock model call each, one string assertion, results on tmpfs.

- mst: ``mst run EVAL --json`` of an eval with one variant (the ``mock`` model, no MCP server,
  answering ``The answer is <expected>.``), N cases from a JSONL dataset, one trial each, one
  ``contains`` assertion, and the default deterministic graders (``--no-graders`` disables them).
- Inspect AI: ``inspect eval TASK --model mockllm/model`` of a task with N samples, a
  ``generate()`` solver and an ``includes()`` scorer. Inspect's mock model counts input tokens
  with tiktoken, whose encoding is a download: the task replaces that counter with a
  length-based one (``len(text) // 4``), so no network is needed and the counting is cheap.

Inspect is never a dependency of mst: it is installed (``pip install inspect-ai``) into its
own venv, ``--inspect-venv``, when that has no ``inspect`` yet. Each tool runs as a child
pinned to one core (``taskset -c 0``), started by a small fresh measuring process so that the
peak RSS reported (``ru_maxrss`` of its children) is the tool's own: Linux counts a big
parent's peak into a child's. The tools alternate within a round, and the order flips every
round. Reported per run: CPU seconds (user + sys: the steadier figure on a shared machine),
wall seconds, peak RSS, CPU ms per sample; per round: Inspect's CPU and wall over mst's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
MST = str(VENV_BIN / "mst")

MST_EVAL = """\
name: vs-inspect-{n}
trials: 1
concurrency: 8
deadlineSeconds: 600
seed: 1
variants:
  - id: mock
    baseline: true
    client: agent
    model: mock
    settings:
      maxTurns: 1
      mock: {{successRate: 1.0, seed: 1, answer: "The answer is {{expected}}."}}
assertions:
  - {{type: contains, value: "The answer is"}}
{graders}datasets:
  - path: cases.jsonl
"""

INSPECT_TASK = '''\
"""The benchmark task: N samples, generate(), includes(); a length-based token counter."""

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model._providers.mockllm import MockLLM
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


async def _count_text_tokens(self, text):
    # tiktoken would download its encoding; the benchmark counts a token per four characters
    return max(1, len(text) // 4)


MockLLM.count_text_tokens = _count_text_tokens


@task
def bench(n: int = {n}) -> Task:
    samples = [Sample(id=f"case-{{i:06d}}", input=f"What is {{i}} plus {{i}}?", target="Default output")
               for i in range(n)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=includes())
'''

_MEASURE = """\
import json, resource, subprocess, sys, time
argv, cwd, env = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                  "rss_mib": ru.ru_maxrss / 1024, "stderr": p.stderr.decode(errors="replace")[-3000:]}))
"""


def measure(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """CPU, wall and peak RSS of ``argv``, pinned to core 0, run by a small fresh process."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    out = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps([*pin, *argv]), str(cwd),
                          json.dumps(env if env is not None else dict(os.environ))],
                         check=True, stdout=subprocess.PIPE).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(out)
    if result["rc"] not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed ({result['rc']}):\n{result['stderr']}")
    return result


def ensure_inspect(venv: Path) -> Path:
    """The ``inspect`` command of ``venv``, installing Inspect AI there first when it is missing."""
    inspect = venv / "bin" / "inspect"
    if not inspect.exists():
        print(f"installing inspect-ai into {venv} (its own venv, not mst's) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "inspect-ai"], check=True)
    return inspect


def inspect_version(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout  # fmt: skip
    return out.strip()


def make_mst(root: Path, n: int, graders: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "cases.jsonl", "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"case-{i:06d}", "prompt": f"What is {i} plus {i}?", "expected": str(2 * i)}))
            fh.write("\n")
    from mst.graders import parse_graders_config

    defaults = [spec.id for spec in parse_graders_config(None).enabled]
    block = "" if graders else "graders:\n" + "".join(f"  {g}: {{enabled: false}}\n" for g in defaults)
    path = root / "eval.yaml"
    path.write_text(MST_EVAL.format(n=n, graders=block))
    return path


def make_inspect(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "bench_task.py"
    path.write_text(INSPECT_TASK.format(n=n))
    return path


def run_mst(root: Path, eval_path: Path, n: int, round_no: int) -> dict[str, Any]:
    runs = root / f"runs-{round_no}"
    r = measure([MST, "run", str(eval_path), "--runs-dir", str(runs), "--json"], root)
    latest = runs / json.loads((runs / "latest.json").read_text())["run"]
    totals = json.loads((latest / "summary.json").read_text())["totals"]
    assert totals["attempts"] == n, totals
    shutil.rmtree(runs, ignore_errors=True)
    return r


def run_inspect(root: Path, inspect: Path, task: Path, n: int, round_no: int) -> dict[str, Any]:
    logs = root / f"logs-{round_no}"
    env = {**os.environ, "INSPECT_LOG_DIR": str(logs), "INSPECT_DISPLAY": "none", "INSPECT_NO_ANSI": "1"}
    argv = [str(inspect), "eval", f"{task}@bench", "--model", "mockllm/model", "--log-dir", str(logs),
            "--display", "none", "--max-samples", "8", "--max-connections", "8"]  # fmt: skip
    r = measure(argv, root, env)
    written = list(logs.glob("*.eval")) + list(logs.glob("*.json"))
    assert written, f"inspect wrote no log under {logs}: {r['stderr']}"
    shutil.rmtree(logs, ignore_errors=True)
    return r


def _line(tool: str, n: int, r: dict[str, Any]) -> str:
    return (f"  {tool:<8} cpu {r['cpu']:>8.2f} s  wall {r['wall']:>8.2f} s  peak RSS {r['rss_mib']:>7.1f} MiB  "
            f"{1000 * r['cpu'] / n:>7.3f} ms CPU/sample")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[2_000, 20_000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inspect-venv", type=Path, default=Path("/dev/shm/inspect-venv"))
    parser.add_argument("--workdir", type=Path, help="evals, tasks and results go here (default: tmpfs)")
    parser.add_argument("--no-graders", action="store_true", help="mst: disable the default graders")
    parser.add_argument("--skip-inspect-above", type=int, default=10**9,
                        help="run only mst for N above this (when Inspect would take too long)")
    parser.add_argument("--write-evals", type=Path, metavar="DIR",
                        help="only write the mst eval of each N to DIR/n-<N>/eval.yaml and exit")
    args = parser.parse_args(argv)
    if args.write_evals is not None:
        for n in args.samples:
            print(make_mst(args.write_evals / f"n-{n}", n, not args.no_graders))
        return 0
    inspect = ensure_inspect(args.inspect_venv)
    shm = Path("/dev/shm")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mst-vs-inspect-", dir=shm if shm.is_dir() else None))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.machine()} {os.cpu_count()} cores, python "
          f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}; "
          f"inspect-ai {inspect_version(args.inspect_venv)}; mst graders {'off' if args.no_graders else 'default'}; "
          f"pinned: {bool(shutil.which('taskset'))}")  # fmt: skip
    try:
        for n in args.samples:
            root = work / f"n-{n}"
            eval_path = make_mst(root / "mst", n, not args.no_graders)
            task = make_inspect(root / "inspect", n)
            with_inspect = n <= args.skip_inspect_above
            print(f"N = {n}" + ("" if with_inspect else " (Inspect skipped)"), flush=True)
            ratios: list[float] = []
            for round_no in range(args.rounds):
                order = ["mst", "inspect"] if round_no % 2 == 0 else ["inspect", "mst"]
                results: dict[str, dict[str, Any]] = {}
                for tool in order:
                    if tool == "mst":
                        results[tool] = run_mst(root / "mst", eval_path, n, round_no)
                    elif with_inspect:
                        results[tool] = run_inspect(root / "inspect", inspect, task, n, round_no)
                    if tool in results:
                        print(_line(tool, n, results[tool]), flush=True)
                if "inspect" in results:
                    m, i = results["mst"], results["inspect"]
                    ratios.append(i["cpu"] / m["cpu"])
                    print(f"  round {round_no + 1}: Inspect/mst CPU {i['cpu'] / m['cpu']:.1f}×, "
                          f"wall {i['wall'] / m['wall']:.1f}×, peak RSS {i['rss_mib'] / m['rss_mib']:.1f}×", flush=True)
            if ratios:  # the figure a target is read against: every round's, not the best one
                print(f"N = {n}: Inspect/mst CPU over {len(ratios)} rounds: min {min(ratios):.1f}×, "
                      f"median {statistics.median(ratios):.1f}×, max {max(ratios):.1f}×", flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
