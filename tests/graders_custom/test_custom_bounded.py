"""The shared process bounds: concurrent draining, output caps, deadlines, process-group kills."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from mst.graders.custom.bounded import run_bounded

PY = sys.executable


def test_stdout_flood_is_capped_and_killed(tmp_path: Path) -> None:
    run = run_bounded([PY, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], env={}, cwd=tmp_path,
                      timeout=30, max_output=1 << 20)  # fmt: skip
    assert run.overflow is not None and run.overflow.startswith("stdout exceeded the 1 MiB")
    assert len(run.stdout) <= (1 << 20) + 65536 and run.returncode < 0


def test_stderr_flood_is_capped_and_killed(tmp_path: Path) -> None:
    run = run_bounded([PY, "-c", "import sys\nwhile True: sys.stderr.write('x' * 65536)"], env={}, cwd=tmp_path,
                      timeout=30, max_output=1 << 20)  # fmt: skip
    assert run.overflow is not None and run.overflow.startswith("stderr exceeded")


def test_stderr_is_drained_while_stdout_is_awaited(tmp_path: Path) -> None:
    # 512 KiB to stderr before any stdout: a reader waiting on stdout alone would deadlock.
    code = "import sys\nsys.stderr.write('e' * (512 * 1024)); sys.stderr.flush(); print('done')"
    run = run_bounded([PY, "-c", code], env={}, cwd=tmp_path, timeout=30)
    assert run.returncode == 0 and run.stdout == b"done\n" and len(run.stderr) == 512 * 1024


def test_large_stdin_is_fed_while_output_is_read(tmp_path: Path) -> None:
    code = "import sys\nfor line in sys.stdin.buffer: sys.stdout.buffer.write(line[:1])"
    data = b"x" * 100 + b"\n"
    run = run_bounded([PY, "-c", code], env={}, cwd=tmp_path, stdin=data * 50_000, timeout=60)
    assert run.returncode == 0 and run.stdout == b"x" * 50_000


def test_deadline_kills_the_whole_group(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = (f"import subprocess, time\np = subprocess.Popen(['sleep', '60'])\n"
            f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(60)")  # fmt: skip
    started = time.monotonic()
    run = run_bounded([PY, "-c", code], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=1.0)
    assert run.timed_out and time.monotonic() - started < 10
    _assert_gone(int(marker.read_text()))


def test_leftover_background_process_is_killed_when_the_leader_exits(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = f"import subprocess\np = subprocess.Popen(['sleep', '60'])\nopen({str(marker)!r}, 'w').write(str(p.pid))"
    started = time.monotonic()
    run = run_bounded([PY, "-c", code], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=30)
    assert not run.timed_out and run.returncode == 0 and time.monotonic() - started < 10
    _assert_gone(int(marker.read_text()))


def test_progress_extends_the_deadline(tmp_path: Path) -> None:
    code = "import time\nfor i in range(4):\n    time.sleep(0.4); print(i, flush=True)"
    seen = [0]

    def progress(out: bytes) -> bool:
        grew = out.count(b"\n") > seen[0]
        seen[0] = out.count(b"\n")
        return grew

    run = run_bounded([PY, "-c", code], env={}, cwd=tmp_path, timeout=1.0, step_timeout=1.0, progress=progress)
    assert not run.timed_out and run.stdout.count(b"\n") == 4


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return  # killed; waiting to be reaped by init
        time.sleep(0.05)
    pytest.fail(f"process {pid} survived")
