"""Benchmark: an agentic judge's workspace for a trial with 100 MB of artifacts (target ≤ 50 ms).

The workspace (``mst.grading.workspace``) holds the trial's transcript as stored and rendered to
Markdown, ``task.json`` and the artifacts, read-only. Timed: :func:`build` from nothing to a
workspace the CLI can start in (folders made, files hard-linked, the transcript rendered, modes
set), then its removal separately. The artifacts are ``--files`` files totalling ``--mb`` MB
in a few folders, the transcript ``--events`` events, all on the same filesystem (so files are
links: the layout mst picks, docs/grading.md "Agentic judges"). ``--copy`` forces copies
instead, the fallback on another filesystem, to show what the links save.

    .venv/bin/python bench/bench_agentic_workspace.py [--mb 100] [--files 200] [--events 400] [--repeat 15]

Reported: median and best wall time, and CPU time (user+sys) of this process, per build and per
removal. Figures: ``bench/agentic_judges.md``.
"""

from __future__ import annotations

import argparse
import errno
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from mst.grading import workspace as ws
from mst.grading.judges import CaseView, TrialView
from mst.session.events import make_event
from mst.session.io import dumps_jsonl


def make_trial(root: Path, mb: int, files: int, events: int) -> TrialView:
    transcript = root / "transcripts/v/c1/0.jsonl"
    transcript.parent.mkdir(parents=True)
    session = [make_event("user.message", {"content": "Fix the failing test."}, component="agent")]
    for i in range(events // 2):
        session.append(make_event("tool.execution_start", {"toolCallId": f"t{i}", "toolName": "read_file",
                                                           "input": {"path": f"src/m{i}.py"}}, component="agent"))
        session.append(make_event("tool.execution_complete", {"toolCallId": f"t{i}", "toolName": "read_file",
                                                              "success": True, "output": "x = 1\n" * 40},
                                  component="agent"))
    transcript.write_bytes(dumps_jsonl(session))
    artifacts = root / "artifacts/v/c1/0"
    size = mb * 1024 * 1024 // files
    block = os.urandom(size)
    for i in range(files):
        path = artifacts / f"dir{i % 10}" / f"file{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(block)
    return TrialView(variant="v", case_id="c1", trial=0, answer="done", ending={"kind": "trial"},
                     transcript=transcript, artifacts_dir=artifacts, prompt="Fix the failing test.")


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--events", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--copy", action="store_true", help="copy instead of linking (another filesystem)")
    args = parser.parse_args()
    if args.copy:
        def no_link(src: str, dst: str, **_: object) -> None:
            raise OSError(errno.EXDEV, "cross-device link")
        os.link = no_link  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(prefix="mst-bench-ws-") as tmp:
        trial = make_trial(Path(tmp) / "run", args.mb, args.files, args.events)
        case = CaseView("c1", "Fix the failing test.", None, {}, 1)
        builds: list[float] = []
        build_cpu: list[float] = []
        removes: list[float] = []
        placed = ws.Placed()
        for _ in range(args.repeat):
            c0, t0 = cpu(), time.perf_counter()
            root, placed = ws.build(case, [("", trial)], parent=tmp)
            builds.append(time.perf_counter() - t0)
            build_cpu.append(cpu() - c0)
            t1 = time.perf_counter()
            ws.remove(root)
            removes.append(time.perf_counter() - t1)
    ms = 1000.0
    print(f"artifacts: {args.mb} MB in {args.files} files, transcript {args.events} events; "
          f"placed: {placed.linked} linked, {placed.copied} copied")
    print(f"build:  median {statistics.median(builds) * ms:.1f} ms, best {min(builds) * ms:.1f} ms wall; "
          f"median {statistics.median(build_cpu) * ms:.1f} ms CPU (user+sys)")
    print(f"remove: median {statistics.median(removes) * ms:.1f} ms, best {min(removes) * ms:.1f} ms wall")


if __name__ == "__main__":
    main()
