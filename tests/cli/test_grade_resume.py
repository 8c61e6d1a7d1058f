"""`mst grade --resume`: keep valid verdicts, grade what has none, regrade changed judges, refuse changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tests.helpers import basic_eval, load, only_run, run_cli, write_eval

JUDGES = '''
from pathlib import Path

HERE = Path(__file__).parent

def _count(name):
    with open(HERE / f"{name}.calls", "a") as fh:
        fh.write("x")

def steady(trial, options):
    _count("steady")
    return True, f"v{options.get('v')}"

def flaky(trial):
    _count("flaky")
    if (HERE / "flaky.broken").exists():
        raise RuntimeError("judge backend unavailable")
    return True
'''


def _calls(tmp: Path, name: str) -> int:
    f = tmp / f"{name}.calls"
    return len(f.read_text()) if f.exists() else 0


def _doc(**judge_opts: Any) -> dict[str, Any]:
    return basic_eval(judges=[{"id": "steady", "code": "judges:steady", "options": judge_opts or {"v": 1}},
                              {"id": "flaky", "code": "judges:flaky"}])


def test_grade_resume_keeps_and_regrades_exactly(tmp_path: Path) -> None:
    (tmp_path / "judges.py").write_text(JUDGES)
    (tmp_path / "flaky.broken").touch()
    path = write_eval(tmp_path, _doc())
    assert run_cli("run", str(path), "--runs-dir", "runs", "--no-grade", cwd=tmp_path).returncode == 3
    source = only_run(tmp_path / "runs")

    proc = run_cli("grade", str(source), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # flaky raised: trials ungraded → incomplete
    regrade = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != source)
    assert load(regrade / "run.json")["phases"]["grade"] == "partial"
    results = load(regrade / "results.json")["trials"]
    assert all(r["status"] == "ungraded" and r["errors"][0]["judge"] == "flaky" for r in results)
    assert "judge backend unavailable" in results[0]["errors"][0]["message"]
    assert _calls(tmp_path, "steady") == 8 and _calls(tmp_path, "flaky") == 8

    (tmp_path / "flaky.broken").unlink()
    proc = run_cli("grade", str(regrade), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _calls(tmp_path, "steady") == 8  # kept: identity unchanged
    assert _calls(tmp_path, "flaky") == 16  # graded: it had no verdict
    assert load(regrade / "run.json")["phases"]["grade"] == "complete"

    write_eval(tmp_path, _doc(v=2))  # the case judge's identity changes
    proc = run_cli("grade", str(regrade), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _calls(tmp_path, "steady") == 16 and _calls(tmp_path, "flaky") == 16
    reasons = {v["reason"] for r in load(regrade / "results.json")["trials"] for v in r["verdicts"]
               if v["judge"] == "steady"}
    assert reasons == {"v2"}

    proc = run_cli("grade", str(regrade), "--resume", cwd=tmp_path)  # nothing left to grade
    assert proc.returncode == 0 and _calls(tmp_path, "steady") == 16


def test_grade_resume_refuses_changed_judges_or_cases(tmp_path: Path) -> None:
    (tmp_path / "judges.py").write_text(JUDGES)
    path = write_eval(tmp_path, _doc())
    assert run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    run = only_run(tmp_path / "runs")

    doc = _doc()
    doc["judges"].append({"id": "extra", "code": "judges:flaky"})
    write_eval(tmp_path, doc)
    proc = run_cli("grade", str(run), "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and "set of judges changed" in proc.stderr

    doc = _doc()
    doc["cases"] = doc["cases"][:1]
    write_eval(tmp_path, doc)
    proc = run_cli("grade", str(run), "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and "cases changed" in proc.stderr
    assert yaml.safe_load(path.read_text())["cases"] == doc["cases"]


def test_judges_run_concurrently_up_to_the_eval_concurrency(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        "import threading, time\n"
        "active = 0\npeak = 0\nlock = threading.Lock()\n\n"
        "def judge(trial):\n"
        "    global active, peak\n"
        "    with lock:\n        active += 1\n        peak = max(peak, active)\n"
        "    time.sleep(0.2)\n"
        "    with lock:\n        active -= 1\n"
        "    return True, f'peak {peak}'\n")
    cases = [{"id": f"c{i}", "prompt": "p", "expected": str(i)} for i in range(8)]
    path = write_eval(tmp_path, basic_eval(cases=cases, concurrency=4, judges=[{"id": "slow", "code": "slow:judge"}]))
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = only_run(tmp_path / "runs")
    peaks = [int(v["reason"].split()[1]) for t in load(run / "results.json")["trials"] for v in t["verdicts"]
             if v["judge"] == "slow"]
    assert max(peaks) == 4  # 32 trials × 0.2 s graded 4 at a time, never more
