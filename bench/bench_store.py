"""Benchmark: uploading a run to the result store against copying it to a local directory.

Usage:
  .venv/bin/python bench/bench_store.py --run RUN_DIR [--repeat 3]
  .venv/bin/python bench/bench_store.py --attempts 20000        # makes the run first (bench_harness's eval)

Measured, each ``--repeat`` times (the best wall time is kept, with its CPU time):
  copy    ``shutil.copytree`` of the run directory to a fresh local directory (the yardstick);
  file    ``upload_run`` to a fresh ``file://`` store;
  s3      ``upload_run`` to a fresh bucket on moto's S3 server (``moto_server``, its own process
          on 127.0.0.1; its CPU is not counted in ours, its wall time is);
  fetch   ``fetch_run`` of that stored run back into a fresh directory, every object checked.
The target (docs/result-store.md): s3 ≤ 2 × copy, in wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall seconds of ``repeat`` runs, and the CPU seconds (user+sys) of that run."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best = min(best, (wall, cpu))
    return best


def make_run(work: Path, attempts: int) -> Path:
    sys.path.insert(0, str(HERE))
    from bench_harness import make_eval

    eval_path = make_eval(work / "eval", attempts)
    subprocess.run([str(VENV_BIN / "mst"), "run", str(eval_path), "--json", "--runs-dir", str(work / "runs")],
                   check=True, stdout=subprocess.DEVNULL)
    return next(p for p in (work / "runs").iterdir() if p.is_dir())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("moto_server did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="an existing run directory")
    parser.add_argument("--attempts", type=int, default=20_000, help="without --run: make a run this big")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mst-bench-store-"))
    port = free_port()
    os.environ.update({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "bench",
                       "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_EC2_METADATA_DISABLED": "true"})
    server = start_moto(port)
    try:
        run = args.run or make_run(work, args.attempts)
        files = sum(len(names) for _, _, names in os.walk(run))
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(f"# run {run.name}: {files} files, {size / 2**20:.1f} MiB; best of {args.repeat}")
        print(f"{'what':8} {'wall s':>8} {'cpu s':>8} {'× copy':>7}")
        figures = bench(run, work, args.repeat)
        copy = figures["copy"][0]
        for what, (wall, cpu) in figures.items():
            print(f"{what:8} {wall:8.2f} {cpu:8.2f} {wall / copy:7.2f}")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def bench(run: Path, work: Path, repeat: int) -> dict[str, tuple[float, float]]:
    import boto3

    from mst.store import fetch_run, open_store, upload_run

    counter = iter(range(1_000_000))

    def copy() -> None:
        shutil.copytree(run, work / f"copy-{next(counter)}")

    def to_file() -> None:
        upload_run(run, open_store(f"file://{work}/store-{next(counter)}"))

    buckets: list[str] = []

    def to_s3() -> None:
        bucket = f"bench-{next(counter)}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        buckets.append(bucket)
        upload_run(run, open_store(f"s3://{bucket}/results"))

    def fetch() -> None:
        fetch_run(open_store(f"s3://{buckets[-1]}/results"), run.name, work / f"fetch-{next(counter)}")

    return {"copy": timed(copy, repeat), "file": timed(to_file, repeat), "s3": timed(to_s3, repeat),
            "fetch": timed(fetch, repeat)}


if __name__ == "__main__":
    sys.exit(main())
