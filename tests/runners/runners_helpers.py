"""Shared pieces of the runner tests: evals whose judges leave evidence, and run comparison."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from tests.helpers import basic_eval, mock_variant, run_cli, write_eval

# A judge that records every call (start and end, with the grading process's pid) in calls.log in
# the test's directory (options["dir"]: a worker imports the judge from its bundle, not from
# there), and can be told to block (a file "block-<case>") so a test can act mid-shard.
JUDGES = '''
import os, time
from pathlib import Path

def _log(here, word, trial):
    with open(Path(here) / "calls.log", "a") as fh:
        fh.write(f"{word} {trial.variant}/{trial.case_id}/{trial.trial} {os.getpid()}\\n")

def counted(trial, options):
    here = options["dir"]
    _log(here, "start", trial)
    block = Path(here) / f"block-{trial.case_id}"
    while block.exists():
        time.sleep(0.05)
    time.sleep(float(options.get("sleep", 0)))
    key = os.environ.get("JUDGE_KEY")
    print(f"judge sees key={key}", flush=True)  # in a worker: stdout is moved to its (redacted) log
    _log(here, "end", trial)
    return trial.answer is not None, f"answer {trial.answer} key={key}"

def prefer(case, a, b):
    return "A" if a.variant == "cand" else "tie"
'''


def judged_eval(tmp: Path, *, cases: int = 6, trials: int = 2, sleep: float = 0.0, pairwise: bool = True,
                judge_secrets: Sequence[str] = (), **overrides: Any) -> Path:
    (tmp / "judges.py").write_text(JUDGES)
    doc = basic_eval(
        trials=trials,
        cases=[{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(cases)],
        variants=[mock_variant("base", baseline=True), mock_variant("cand")],
        judges=[{"id": "counted", "code": "judges:counted", "options": {"sleep": sleep, "dir": str(tmp)},
                 "secrets": list(judge_secrets)}],
        **({"pairwise": {"code": "judges:prefer"}} if pairwise else {}),
    )
    doc.update(overrides)
    return write_eval(tmp, doc)


def collected_run(tmp: Path, eval_path: Path) -> Path:
    """Collect (no grading) into tmp/runs and return the run directory."""
    proc = run_cli("run", str(eval_path), "--runs-dir", "runs", "--no-grade", cwd=tmp)
    assert proc.returncode == 3, proc.stderr  # ungraded trials: incomplete by design
    (run,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    return run


def new_run(runs: Path, before: set[Path]) -> Path:
    (created,) = {p for p in runs.iterdir() if p.is_dir()} - before
    return created


def calls(tmp: Path, word: str = "end") -> list[str]:
    log = tmp / "calls.log"
    if not log.exists():
        return []
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith(word + " ")]


# --- comparing two runs -------------------------------------------------------------------------
#
# What legitimately differs between a local and a sharded run of the same work, and is ignored:
#   * the run's own id: the directory name, run.json "id", the "run" field of results/summary/
#     comparisons, and latest.json's pointer (each run is a new directory);
#   * wall-clock fields: createdAt/updatedAt, an attempt's startedAt, durationMs/meanDurationMs/latencyMs (how
#     long a judge or an attempt took), transcript event timestampMs (when it happened within its attempt), and the
#     execution-duration grader's value, which is an attempt's wall-clock time (collecting only:
#     a regrade reads the same transcripts, so there it is compared too);
#   * where the work ran: run.json "runner" (collecting) and "grading.runner" (grading).
# Everything else — every verdict, reason, usage, preference, status, phase, ordering, and every
# file's presence — must be byte-identical after that.

TIME_KEYS = {"createdAt", "updatedAt", "startedAt", "durationMs", "meanDurationMs", "timestampMs", "latencyMs"}
WALL_CLOCK_GRADER = "execution-duration"
WALL_CLOCK_KEYS = {WALL_CLOCK_GRADER, f"grader:{WALL_CLOCK_GRADER}"}  # its mean, and its paired comparison


def _scrub(value: Any, run_id: str, *, clock: bool = False) -> Any:
    if isinstance(value, dict):
        if clock and value.get("id") == WALL_CLOCK_GRADER:
            return {"id": WALL_CLOCK_GRADER}
        return {k: _scrub(v, run_id, clock=clock) for k, v in value.items()
                if k not in TIME_KEYS and not (clock and k in WALL_CLOCK_KEYS)}
    if isinstance(value, list):
        return [_scrub(v, run_id, clock=clock) for v in value]
    if isinstance(value, str):
        return value.replace(run_id, "<run>")
    return value


def normalized_run(root: Path, *, collected: bool = False) -> dict[str, Any]:
    """Every file of a run, parsed and scrubbed of the fields above; the attempts journal sorted.

    ``collected``: the two runs collected their own attempts, so wall-clock grader values differ.
    """
    out: dict[str, Any] = {}
    run_id = root.name
    for file in sorted(root.rglob("*")):
        if not file.is_file():
            continue
        rel = str(file.relative_to(root))
        raw = file.read_bytes()
        if rel == "report.html" or rel.startswith("report/"):
            rel, data = _report_data(rel, raw)
            out[rel] = _scrub(data, run_id, clock=collected)
        elif file.suffix == ".jsonl":
            lines = [_scrub(orjson.loads(line), run_id, clock=collected) for line in raw.splitlines() if line.strip()]
            out[rel] = sorted(orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in lines) \
                if rel == "attempts.jsonl" else lines  # collected in completion order, even locally
        elif file.suffix == ".json":
            data = _scrub(orjson.loads(raw), run_id, clock=collected)
            if rel == "run.json":
                data.pop("runner", None)
                data.get("grading", {}).pop("runner", None)
            out[rel] = data
        else:
            out[rel] = raw
    return out


def assert_same_files(got: dict[str, Any], want: dict[str, Any]) -> None:
    """File by file, so that a difference names its file (a whole-run diff is cut in CI logs)."""
    assert sorted(got) == sorted(want)
    for rel in sorted(want):
        assert got[rel] == want[rel], f"{rel}: {_difference(got[rel], want[rel])}"


def _difference(got: Any, want: Any) -> str:
    """What one side has and the other lacks, short enough for a CI log."""
    if isinstance(got, list) and isinstance(want, list):
        ours = [orjson.dumps(x, option=orjson.OPT_SORT_KEYS).decode() for x in got]
        theirs = [orjson.dumps(x, option=orjson.OPT_SORT_KEYS).decode() for x in want]
        only_got, only_want = [x for x in ours if x not in theirs], [x for x in theirs if x not in ours]
        text = f"only in got: {only_got}; only in want: {only_want}"
    else:
        text = f"got {got!r}; want {want!r}"
    return text[:3000]


def _report_data(rel: str, raw: bytes) -> tuple[str, Any]:
    """report.html and its trial chunks as the JSON they embed (docs/report.md): the page's
    script and style are the same in every run, and the chunks' folder is named by a random
    generation, so ``report/<generation>/c0.js`` is compared as ``report/c0.js``."""
    if rel == "report.html":
        text = raw.decode()
        start = text.index('id="mst-data">') + len('id="mst-data">')
        data = orjson.loads(text[start:text.index("</script>", start)].replace("<\\/", "</"))
        data["chunks"].pop("path")
        return rel, data
    body = raw.decode().strip()
    assert body.startswith("mstChunk(") and body.endswith(");"), rel
    return "report/" + rel.rsplit("/", 1)[1], orjson.loads(body[len("mstChunk("):-2])


def canary_free(paths: list[Path], canary: str) -> list[str]:
    """Files under ``paths`` whose bytes contain ``canary``."""
    found = []
    for base in paths:
        for file in [base] if base.is_file() else base.rglob("*"):
            if file.is_file() and canary.encode() in file.read_bytes():
                found.append(str(file))
    return found


def proc_leaks(canary: str) -> list[str]:
    """Processes whose argv or environment hold ``canary`` (every process this user can read)."""
    leaks = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{pid}/{part}").read_bytes()
            except OSError:
                continue
            if canary.encode() in data:
                leaks.append(f"{pid}/{part}: {re.sub(rb'[^ -~]', b' ', data)[:200]!r}")
    return leaks
