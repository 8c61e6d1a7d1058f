"""Benchmark: harness overhead of `mst run` / `mst grade` with the offline mock model.

Usage:
  .venv/bin/python bench/bench_harness.py run     [--attempts 2000 20000 100000] [--no-grade-above N]
  .venv/bin/python bench/bench_harness.py regrade [--attempts 20000]
  .venv/bin/python bench/bench_harness.py version [--repeat 5]
  .venv/bin/python bench/bench_harness.py latency [--attempts 2000] [--latency-ms 100] [--concurrency 100]
  .venv/bin/python bench/bench_harness.py all

The generated eval (in ``--workdir``, default a temp dir) has N/10 cases × 2 variants × 5
trials; the variants use the ``mock`` model with no MCP server (successRate 0.8 / 0.9), two
eval-level assertions (``final-answer``, ``contains`` of the expected value), a code judge, a
pairwise code judge and the default deterministic graders. Cases come from a JSONL dataset.

``--no-graders`` disables the ten default deterministic graders (``run`` and ``regrade``).
``run`` starts ``mst run EVAL --json`` as a child process pinned to one core
(``taskset -c 0``) and reports wall time per attempt end to end (process start, collect,
grade, summary, run.json) and the child's peak RSS (``getrusage(RUSAGE_CHILDREN)``, one child
per measurement, each in a fresh ``bench_harness`` sub-process so the maxima do not mix).
``regrade`` times ``mst grade RUN --json`` of a run made by ``run``. ``version`` times
``mst --version``. ``latency`` runs the collect phase in-process with ``latencyMs`` of mock
latency per model call and compares the wall time to the ideal ``ceil(N / concurrency) ×
latency``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
MST = str(VENV_BIN / "mst")

JUDGES_PY = '''\
"""Code judges for the benchmark eval."""


def mentions_expected(trial):
    expected = str(trial.expected).lower()
    if expected in (trial.answer or "").lower():
        return True, "answer mentions the expected value"
    return False, "answer does not mention the expected value"


def prefer_correct(case, a, b):
    expected = str(case.expected).lower()
    a_ok = expected in (a.answer or "").lower()
    b_ok = expected in (b.answer or "").lower()
    if a_ok != b_ok:
        return ("A" if a_ok else "B"), "only one answer is correct"
    return "tie", "equally good"
'''

EVAL_YAML = """\
name: bench-{n}
trials: {trials}
concurrency: {concurrency}
gradingConcurrency: 1  # the judges here are CPU-bound Python: a thread pool only adds GIL hand-offs
deadlineSeconds: 60
seed: 3
variants:
  - id: baseline
    baseline: true
    client: agent
    model: mock
    settings:
      maxTurns: 4
      mock: {{successRate: 0.8, seed: 1, latencyMs: {latency}, answer: "The answer is {{expected}}."}}
  - id: candidate
    client: agent
    model: mock
    settings:
      maxTurns: 4
      mock: {{successRate: 0.9, seed: 2, latencyMs: {latency}, answer: "The answer is {{expected}}."}}
assertions:
  - type: final-answer
  - {{type: regex, pattern: "answer is [0-9]+"}}
judges:
  - id: mentions-expected
    code: judges:mentions_expected
pairwise:
  code: judges:prefer_correct
datasets:
  - path: cases.jsonl
"""


def make_eval(root: Path, attempts: int, *, latency_ms: float = 0, concurrency: int = 8,
              cases: int | None = None, graders: bool = True) -> Path:
    """An eval of ``attempts`` attempts: attempts/10 cases × 2 variants × 5 trials, or ``cases``
    cases × 2 variants × attempts/(2 × cases) trials; ``graders=False`` disables every default
    deterministic grader."""
    n_cases = cases or max(1, attempts // 10)
    trials = max(1, attempts // (2 * n_cases))
    root.mkdir(parents=True, exist_ok=True)
    (root / "judges.py").write_text(JUDGES_PY)
    with open(root / "cases.jsonl", "w") as fh:
        for i in range(n_cases):
            fh.write(
                json.dumps(
                    {
                        "id": f"case-{i:06d}",
                        "prompt": f"What is {i} plus {i}?",
                        "expected": str(2 * i),
                        "metadata": {"i": i},
                    }
                )
                + "\n"
            )
    path = root / "eval.yaml"
    text = EVAL_YAML.format(n=n_cases * 2 * trials, trials=trials, concurrency=concurrency, latency=latency_ms)
    if not graders:
        from mst.graders import DEFAULT_IDS

        text += "graders:\n" + "".join(f"  {gid}: {{enabled: false}}\n" for gid in DEFAULT_IDS)
    path.write_text(text)
    return path


def _pinned(argv: list[str]) -> list[str]:
    return (["taskset", "-c", "0"] if shutil.which("taskset") else []) + argv


def measure_child(argv: list[str], cwd: Path) -> dict[str, float]:
    """Run ``argv`` in a fresh measuring process: wall seconds and the child's peak RSS (MiB)."""
    code = (
        "import json, resource, subprocess, sys, time\n"
        "argv, cwd = json.loads(sys.argv[1]), sys.argv[2]\n"
        "t0 = time.perf_counter()\n"
        "p = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "wall = time.perf_counter() - t0\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'rc': p.returncode, 'wall': wall, 'rss_mib': ru.ru_maxrss / 1024,\n"
        "                  'cpu': ru.ru_utime + ru.ru_stime, 'sys': ru.ru_stime,\n"
        "                  'stderr': p.stderr.decode()[-4000:]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(argv), str(cwd)], check=True, stdout=subprocess.PIPE
    ).stdout
    result = json.loads(out)
    if result["rc"] not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed ({result['rc']}):\n{result['stderr']}")
    return result


def _latest(runs_dir: Path) -> Path:
    return runs_dir / json.loads((runs_dir / "latest.json").read_text())["run"]


def bench_run(args: argparse.Namespace, work: Path) -> dict[int, Path]:
    runs: dict[int, Path] = {}
    print(
        f"{'attempts':>9} {'grade':>6} {'wall s':>8} {'ms/attempt':>11} {'cpu s':>7} {'sys s':>7} {'peak RSS MiB':>13}"
    )
    for n in args.attempts:
        name = f"eval-{n}" if args.cases is None else f"eval-{n}-{args.cases}-cases"
        root = work / (name if args.graders else f"{name}-no-graders")
        eval_path = make_eval(root, n, cases=args.cases, graders=args.graders)
        grade = n <= args.no_grade_above
        argv = [MST, "run", str(eval_path), "--runs-dir", str(root / "runs"), "--json"]
        if not grade:
            argv.append("--no-grade")
        r = measure_child(_pinned(argv), root)
        runs[n] = _latest(root / "runs")
        print(
            f"{n:>9} {'yes' if grade else 'no':>6} {r['wall']:>8.2f} {1000 * r['wall'] / n:>11.3f} "
            f"{r['cpu']:>7.2f} {r['sys']:>7.2f} {r['rss_mib']:>13.1f}",
            flush=True,
        )
    return runs


def bench_regrade(args: argparse.Namespace, work: Path, runs: dict[int, Path] | None = None) -> None:
    n = args.regrade_attempts
    run_dir = (runs or {}).get(n)
    if run_dir is None:
        root = work / (f"eval-{n}" if args.graders else f"eval-{n}-no-graders")
        eval_path = make_eval(root, n, graders=args.graders)
        r = measure_child(_pinned([MST, "run", str(eval_path), "--runs-dir", str(root / "runs"), "--json"]), root)
        run_dir = _latest(root / "runs")
    out_dir = work / f"regrades-{n}"
    r = measure_child(_pinned([MST, "grade", str(run_dir), "--runs-dir", str(out_dir), "--json"]), work)
    trials = json.loads((_latest(out_dir) / "summary.json").read_text())["totals"]["trials"]
    print(
        f"regrade of {n} attempts ({trials} trials): {r['wall']:.2f} s wall, "
        f"{1000 * r['wall'] / trials:.3f} ms/trial, cpu {r['cpu']:.2f} s (sys {r['sys']:.2f}), "
        f"peak RSS {r['rss_mib']:.1f} MiB"
    )


def bench_version(args: argparse.Namespace) -> None:
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run(_pinned([MST, "--version"]), check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    print(f"mst --version: best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s ({args.repeat} runs)")


def bench_latency(args: argparse.Namespace, work: Path) -> None:
    """Collect only, in-process: wall time against ceil(N / concurrency) × latency."""
    from mst.api import run_eval

    n = args.latency_attempts
    root = work / f"latency-{n}"
    eval_path = make_eval(root, n, latency_ms=args.latency_ms, concurrency=args.concurrency)
    clock = _PhaseClock()
    t0 = time.perf_counter()
    outcome = run_eval(eval_path, runs_dir=root / "runs", no_grade=True, progress=clock)
    total = time.perf_counter() - t0
    assert outcome.summary["totals"]["attempts"] == n, outcome.summary["totals"]
    start, end = clock.times["collect"]
    wall = end - start
    ideal = math.ceil(n / args.concurrency) * args.latency_ms / 1000
    print(
        f"latency {args.latency_ms:g} ms × {n} attempts at concurrency {args.concurrency}: "
        f"collect {wall:.2f} s (whole run_eval {total:.2f} s), ideal {ideal:.2f} s, "
        f"throughput {n / wall:.0f}/s = {100 * ideal / wall:.1f}% of ideal"
    )


class _PhaseClock:
    """A progress sink that times each phase, from its start to its finish."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self._phase = ""

    def start(self, phase: str, total: int) -> None:
        self._phase = phase
        self.times[phase] = [time.perf_counter()]

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        self.times[self._phase].append(time.perf_counter())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["run", "regrade", "version", "latency", "all"])
    parser.add_argument("--attempts", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument(
        "--no-grade-above", type=int, default=10**9, help="collect only (--no-grade) for runs larger than this"
    )
    parser.add_argument("--cases", type=int, help="run: this many cases, the trials growing with --attempts")
    parser.add_argument("--regrade-attempts", type=int, default=20_000)
    parser.add_argument("--no-graders", dest="graders", action="store_false",
                        help="run, regrade: disable every default deterministic grader")
    parser.add_argument("--latency-attempts", type=int, default=2_000)
    parser.add_argument("--latency-ms", type=float, default=100)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the generated evals and runs here")
    args = parser.parse_args(argv)
    print(
        f"# {time.strftime('%Y-%m-%d')} {platform.machine()} {os.cpu_count()} cores, "
        f"python {platform.python_version()}, pinned to core 0: {bool(shutil.which('taskset'))}"
    )
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mst-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.what == "version":
            bench_version(args)
        elif args.what == "run":
            bench_run(args, work)
        elif args.what == "regrade":
            bench_regrade(args, work)
        elif args.what == "latency":
            bench_latency(args, work)
        else:
            bench_version(args)
            runs = bench_run(args, work)
            bench_regrade(args, work, runs)
            bench_latency(args, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
