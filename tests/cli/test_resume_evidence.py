"""Resume over damaged evidence: a garbage results.json is rebuilt from grading.jsonl, and an
attempt whose transcript was deleted is collected again as a new try and graded afresh."""

from __future__ import annotations

import collections
from pathlib import Path

import orjson
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval


def _run(tmp_path: Path, **overrides: object) -> Path:
    (tmp_path / "pj.py").write_text("def prefer(case, a, b):\n    return 'A'\n")
    doc = basic_eval(graders={}, pairwise={"code": "pj:prefer"}, **overrides)
    assert run_cli("run", str(write_eval(tmp_path, doc)), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    return only_run(tmp_path / "runs")


def test_garbage_results_json_is_rebuilt_from_the_grading_journal(tmp_path: Path) -> None:
    run = _run(tmp_path)
    results, comparisons = load(run / "results.json"), load(run / "comparisons.json")
    journal_lines = len((run / "grading.jsonl").read_bytes().splitlines())
    (run / "results.json").write_bytes(b"\x00garbage{{{")
    (run / "comparisons.json").write_text('{"comparisons": [1, 2')
    for args in (["grade", str(run), "--resume"], ["run", "--resume", str(run)]):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert load(run / "results.json") == results and load(run / "comparisons.json") == comparisons
        assert len((run / "grading.jsonl").read_bytes().splitlines()) == journal_lines  # nothing judged again
        (run / "results.json").write_text("][")


def test_a_deleted_transcript_is_collected_again_and_graded_afresh(tmp_path: Path) -> None:
    run = _run(tmp_path)
    lost = run / "transcripts/cand/c1/1.jsonl"
    lost.unlink()
    before = {(a["variant"], a["case"], a["trial"]): a for a in load(run / "run.json")["attempts"]}
    grades_before = len((run / "grading.jsonl").read_bytes().splitlines())

    how = "1 attempt(s) have lost their transcript (their evidence is unavailable): cand/c1/1; " \
          "`mst run --resume RUN` collects them again"
    graded = run_cli("grade", str(run), "--resume", cwd=tmp_path)  # grading cannot bring it back: says how
    assert graded.returncode == 0 and how in graded.stderr.replace("\n", " "), graded.stderr
    regrade = run_cli("grade", str(run), cwd=tmp_path)
    assert regrade.returncode == 3 and how in regrade.stderr.replace("\n", " ")
    regraded = max((p for p in (tmp_path / "runs").iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    errors = [e["message"] for t in load(regraded / "results.json")["trials"] for e in t["errors"]]
    assert errors and all("`mst run --resume RUN` collects this attempt again" in m for m in errors)

    proc = run_cli("run", "--resume", str(run), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note: 1 attempt(s) had lost their transcript and were collected again as a new try: cand/c1/1" \
        in proc.stderr.replace("\n", " ")
    assert lost.is_file()
    after = {(a["variant"], a["case"], a["trial"]): a for a in load(run / "run.json")["attempts"]}
    assert set(after) == set(before)  # each attempt once in run.json
    assert after[("cand", "c1", 1)]["try"] == 2
    assert all(after[k] == before[k] for k in before if k != ("cand", "c1", 1))
    journal = collections.Counter((r["variant"], r["case"], r["trial"])
                                  for r in map(orjson.loads, (run / "attempts.jsonl").read_bytes().splitlines()))
    assert journal[("cand", "c1", 1)] == 2 and journal[("cand", "c1", 0)] == 1
    grading = [orjson.loads(x) for x in (run / "grading.jsonl").read_bytes().splitlines()[grades_before:]]
    assert [(g.get("variant"), g.get("case"), g.get("trial"), g.get("try")) for g in grading if "kind" not in g] \
        == [("cand", "c1", 1, 2)]  # only the new try is graded again
    assert [(g["candidate"], g["case"]) for g in grading if g.get("kind") == "pairwise"] == [("cand", "c1")]
    trial = next(t for t in load(run / "results.json")["trials"] if (t["variant"], t["case"], t["trial"])
                 == ("cand", "c1", 1))
    assert trial["status"] == "graded" and trial["try"] == 2


def test_a_regraded_try_is_not_mistaken_for_the_earlier_one_after_a_crash(tmp_path: Path) -> None:
    """Killed between collecting the new try and grading it: the earlier try's verdict is not kept."""
    run = _run(tmp_path, variants=[mock_variant("base", baseline=True), mock_variant("cand")])
    record = next(a for a in load(run / "run.json")["attempts"] if (a["variant"], a["case"], a["trial"])
                  == ("base", "c2", 0))
    with open(run / "attempts.jsonl", "ab") as fh:  # as a resume that died right after collecting it again
        fh.write(orjson.dumps({**record, "try": 2}) + b"\n")
    grades_before = len((run / "grading.jsonl").read_bytes().splitlines())
    assert run_cli("grade", str(run), "--resume", cwd=tmp_path).returncode == 0
    grading = [orjson.loads(x) for x in (run / "grading.jsonl").read_bytes().splitlines()[grades_before:]]
    assert [(g.get("variant"), g.get("case"), g.get("trial"), g.get("try")) for g in grading if "kind" not in g] \
        == [("base", "c2", 0, 2)]
    assert [(g["candidate"], g["case"]) for g in grading if g.get("kind") == "pairwise"] == [("cand", "c2")]
