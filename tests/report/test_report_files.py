"""report.html and its trial chunks as files: written after a run and a regrade, self-contained,
the summary embedded as the typed Summary reads it, transcripts cut visibly, `mst report`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.helpers import load, only_run, run_cli

from mst import fileio
from mst.report.html import CHUNKS_DIR, Matrix, PageData, render_page, write_report
from mst.report.trials import CUT_EVENT, NO_ARTIFACTS, ChunkPlan, list_artifacts, transcript_json
from mst.runs.layout import RunPaths
from mst.runs.record_files import RecordFile, read_record_file
from mst.runs.run import open_run
from mst.runs.summary import Summary


def page_data(report: Path) -> dict[str, Any]:
    text = report.read_text()
    match = re.search(r'<script type="application/json" id="mst-data">(.*?)</script>', text, re.S)
    assert match, "no embedded data"
    return dict(orjson.loads(match.group(1).replace("<\\/", "</")))


def chunk(run: Path, data: dict[str, Any], case: str) -> dict[str, Any]:
    index = data["matrix"]["cases"].index(case)
    text = (run / data["chunks"]["path"] / ChunkPlan(data["chunks"]["casesPerChunk"]).name(index)).read_text()
    assert text.startswith("mstChunk(") and text.rstrip().endswith(");")
    return dict(orjson.loads(text.strip()[len("mstChunk("):-2])[case])


def test_a_run_writes_a_self_contained_report(report_run: Path) -> None:
    report = report_run / "report.html"
    text = report.read_text()
    # no network: nothing is loaded from anywhere but the run directory
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', text)
    assert re.findall(r"<link[^>]*>", text) == ['<link rel="icon" href="data:,">'] and "@import" not in text
    assert re.search(r"<style>.+</style>", text, re.S) and "window.mstChunk" in text


def test_the_page_embeds_the_summary_the_terminal_prints(report_run: Path) -> None:
    data = page_data(report_run / "report.html")
    head = read_record_file(report_run / "summary.json", "summary.json", "cases").head
    assert data["summary"] == Summary.from_json(head).to_json()
    rows = load(report_run / "summary.json")["cases"]
    matrix = data["matrix"]
    assert matrix["cases"] == [r["id"] for r in rows]
    for v in matrix["variants"]:
        assert matrix["status"][v] == "".join(r["variants"][v]["status"][0] for r in rows)
        assert matrix["rate"][v] == [r["variants"][v]["passRate"] for r in rows]
        assert matrix["passed"][v] == [r["variants"][v]["passed"] for r in rows]
    assert "i" in matrix["status"]["base"]  # the case whose first trial needs a fix is incomplete


def test_the_page_data_is_written_in_pieces_as_one_escaped_json_value(report_run: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Pieces of 7 bytes: every column is cut many times, and a ``</`` inside a case id must
    # still be escaped (it would end the data's script element early).
    monkeypatch.setattr(fileio, "IO_BLOCK", 7)
    head = read_record_file(report_run / "summary.json", "summary.json", "cases").head
    summary = Summary.from_json(head)
    rows = [{"id": "case-</script><b>", "trials": 2, "variants": {
                "base": {"status": "passed", "passed": 2, "graded": 2, "passRate": 1.0},
                "cand": {"status": "failed", "passed": 1, "graded": 2, "passRate": 0.5}}},
            {"id": "plain", "trials": 3, "variants": {"base": {"status": "incomplete", "passed": 0, "graded": 0,
                                                              "passRate": None}}},
            {"id": "x</y", "variants": {"base": "not a cell", "cand": {"status": "odd", "passRate": 1 / 3}}}]
    page = PageData.of(summary, head, iter(rows), "report/g")
    shown = {**summary.to_json(), **({"judgeUsage": head["judgeUsage"]} if head.get("judgeUsage") else {})}
    expected = {"schema": "mst.report/v1", "summary": shown, "matrix": {
        "cases": ["case-</script><b>", "plain", "x</y"], "trials": [2, 3, 0], "variants": ["base", "cand"],
        "status": {"base": "pi-", "cand": "f--"}, "rate": {"base": [1.0, None, None], "cand": [0.5, None, 1 / 3]},
        "passed": {"base": [2, 0, 0], "cand": [1, 0, 0]}, "graded": {"base": [2, 0, 0], "cand": [2, 0, 0]}},
        "chunks": {"path": "report/g", "casesPerChunk": 16}}
    pieces = list(render_page(page))
    columns = [p for p in pieces if isinstance(p, memoryview)]  # the columns' bytes, sliced
    assert len(columns) > 10 and all(len(p) <= 7 for p in columns)
    html = b"".join(pieces)
    start = html.index(b'id="mst-data">') + len(b'id="mst-data">')
    assert html[start:html.index(b"</script>")] == orjson.dumps(expected).replace(b"</", b"<\\/")
    assert page.matrix.case_ids() == expected["matrix"]["cases"]  # type: ignore[index]
    assert page.matrix.ordered  # no order was asked for
    assert not PageData.of(summary, head, iter(rows), "g", order=iter(["case-</script><b>", "plain"])).matrix.ordered
    assert PageData.of(summary, head, iter(rows), "g", order=iter(r["id"] for r in rows)).matrix.ordered


def test_a_matrix_made_as_the_rows_are_written_gives_the_page_read_from_the_file(
        report_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_report given summary.json's rows' matrix reads only the file's head, and writes the
    page it writes from the rows read back (same bytes but the chunks' generation)."""
    rows = load(report_run / "summary.json")["cases"]
    variants = list(rows[0]["variants"])
    generation = re.compile(rb"report/[0-9a-f]{8}")
    read_back = generation.sub(b"GEN", write_report(report_run).read_bytes())
    matrix = Matrix.start(variants, iter(r["id"] for r in rows))
    for row in rows:
        matrix.add_row(row)
    assert matrix.done().ordered

    def no_rows(self: object) -> Iterator[Any]:  # as records(): reads when iterated, fails then
        yield from ()
        raise AssertionError("the rows were read back")

    run = open_run(report_run)
    monkeypatch.setattr(RecordFile, "records", no_rows)
    assert generation.sub(b"GEN", write_report(run, None, matrix).read_bytes()) == read_back
    short = Matrix.start(variants, iter([r["id"] for r in rows][:-1]))
    longer = Matrix.start(variants, iter([*(r["id"] for r in rows), "more"]))
    for row in rows:
        short.add_row(row)
        longer.add_row(row)
    assert not short.done().ordered and not longer.done().ordered

def test_every_trial_is_in_its_chunk_with_its_evidence(report_run: Path) -> None:
    data = page_data(report_run / "report.html")
    results = {(r["variant"], r["case"], r["trial"]): r for r in load(report_run / "results.json")["trials"]}
    attempts = load(report_run / "run.json")["attempts"]
    assert attempts
    for attempt in attempts:
        trial = chunk(report_run, data, attempt["case"])["trials"][f"{attempt['variant']}/{attempt['trial']}"]
        assert trial["attempt"] == attempt
        assert trial["grade"] == results.get((attempt["variant"], attempt["case"], attempt["trial"]))
        if attempt["transcript"]:
            lines = (report_run / attempt["transcript"]).read_bytes().splitlines()
            assert trial["transcript"] == [orjson.loads(line) for line in lines if line.strip()]
    comparisons = load(report_run / "comparisons.json")["comparisons"]
    assert comparisons
    for record in comparisons:
        assert chunk(report_run, data, record["case"])["pairs"] == {record["candidate"]: record}


def test_a_transcript_over_budget_is_cut_in_the_middle_with_a_marker(tmp_path: Path) -> None:
    events = [{"type": "user.message", "data": {"content": "x" * 90, "n": i}, "provenance": {}} for i in range(100)]
    (tmp_path / "t.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    whole = orjson.loads(transcript_json(RunPaths(tmp_path), "t.jsonl"))
    assert whole == events
    cut = orjson.loads(transcript_json(RunPaths(tmp_path), "t.jsonl", budget=2000))
    markers = [e for e in cut if e["type"] == CUT_EVENT]
    assert len(markers) == 1
    kept = [e for e in cut if e["type"] != CUT_EVENT]
    assert kept[0] == events[0] and kept[-1] == events[-1]
    assert len(kept) + markers[0]["data"]["events"] == len(events)  # nothing dropped silently
    assert "t.jsonl" in markers[0]["data"]["text"] and "events cut" in markers[0]["data"]["text"]


def test_a_broken_transcript_line_is_shown_as_such(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_bytes(b'{"type": "user.message", "data": {}, "provenance": {}}\n{"torn\n')
    events = orjson.loads(transcript_json(RunPaths(tmp_path), "t.jsonl"))
    assert events[0]["type"] == "user.message"
    assert events[1]["type"] == CUT_EVENT and "line 2" in events[1]["data"]["text"]
    missing = orjson.loads(transcript_json(RunPaths(tmp_path), "gone.jsonl"))
    assert missing[0]["type"] == CUT_EVENT and "cannot be read" in missing[0]["data"]["text"]


def test_artifacts_are_listed_up_to_a_limit_and_the_rest_counted(tmp_path: Path) -> None:
    folder = tmp_path / "artifacts" / "v" / "c" / "0"
    folder.mkdir(parents=True)
    for i in range(5):
        (folder / f"f{i}.txt").write_text("x" * i)
    listed = list_artifacts(RunPaths(tmp_path), "artifacts/v/c/0", limit=3)
    assert listed == {"files": [["artifacts/v/c/0/f0.txt", 0], ["artifacts/v/c/0/f1.txt", 1],
                                ["artifacts/v/c/0/f2.txt", 2]], "more": 2}
    for none in (None, ""):  # what a trial without artifacts is written as, without the listing
        assert orjson.dumps(list_artifacts(RunPaths(tmp_path), none)) == NO_ARTIFACTS


def test_writing_again_replaces_the_generation_and_keeps_one(report_run: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / report_run.name
    shutil.copytree(report_run, run)
    first = page_data(run / "report.html")["chunks"]["path"]
    write_report(run)
    second = page_data(run / "report.html")["chunks"]["path"]
    assert first != second
    assert [p.name for p in (run / CHUNKS_DIR).iterdir()] == [second.split("/")[1]]
    assert not list(run.glob(".report.html.*"))  # the page was renamed into place


def test_mst_report_writes_it_for_any_run(report_run: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "runs" / report_run.name
    shutil.copytree(report_run, run)
    (run / "report.html").unlink()
    shutil.rmtree(run / CHUNKS_DIR)
    done = run_cli("report", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((run / "report.html").resolve())
    assert page_data(run / "report.html")["summary"]["run"] == run.name
    bad = run_cli("report", str(tmp_path / "nothing"), cwd=tmp_path)
    assert bad.returncode == 2 and "not a run directory" in bad.stderr


@pytest.mark.slow
def test_a_regrade_writes_its_own_report(report_run: Path, tmp_path: Path) -> None:
    done = run_cli("grade", str(report_run), "--runs-dir", str(tmp_path / "regrades"), cwd=report_run.parent.parent)
    assert done.returncode in (0, 3), done.stderr
    regrade = only_run(tmp_path / "regrades")
    data = page_data(regrade / "report.html")
    assert data["summary"]["regradeOf"] == report_run.name
    assert data["summary"] == Summary.from_json(load(regrade / "summary.json")).to_json()


def _get(url: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_the_viewer_lists_runs_and_writes_a_missing_or_stale_report(report_run: Path, tmp_path: Path) -> None:
    import os
    import shutil

    from mst.report.serve import start_viewer

    runs = tmp_path / "runs"
    run = runs / report_run.name
    shutil.copytree(report_run, run)
    (run / "report.html").unlink()
    (runs / ".hidden-staging").mkdir()
    viewer = start_viewer(runs)
    try:
        assert viewer.url.startswith("http://127.0.0.1:")
        status, index = _get(viewer.url)
        assert status == 200 and f'href="{run.name}/report.html"' in index.decode()
        assert "report-e2e" in index.decode() and "base " in index.decode() and ".hidden" not in index.decode()
        status, page = _get(f"{viewer.url}{run.name}/report.html")
        assert status == 200 and b"mst-data" in page and (run / "report.html").is_file()
        before = (run / "report.html").stat().st_mtime
        os.utime(run / "summary.json", (before + 10, before + 10))  # graded since: the report is stale
        _get(f"{viewer.url}{run.name}/report.html")
        assert (run / "report.html").stat().st_mtime > before
        chunks = page_data(run / "report.html")["chunks"]["path"]
        assert _get(f"{viewer.url}{run.name}/{chunks}/c0.js")[0] == 200
        assert _get(f"{viewer.url}../{tmp_path.name}")[0] == 404
    finally:
        viewer.stop()


def test_mst_view_prints_its_url_and_serves(report_run: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "mst", "view", str(report_run.parent), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        assert _get(url.group())[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)
    missing = run_cli("view", str(report_run.parent / "nothing"), "--port", "0", cwd=report_run.parent)
    assert missing.returncode == 2 and "not a runs directory" in missing.stderr


def test_blank_and_spaced_lines_read_as_the_plain_jsonl_of_the_same_events(tmp_path: Path) -> None:
    """Plain JSONL takes the one-decode way, any other layout the line-by-line one: same events."""
    events = [{"type": "user.message", "data": {"n": i}, "provenance": {}} for i in range(3)]
    lines = [orjson.dumps(e) for e in events]
    for body in (b"\n".join(lines) + b"\n", b"\n\n".join(lines), b"\n  \n".join(lines) + b"\r\n"):
        (tmp_path / "t.jsonl").write_bytes(body)
        assert orjson.loads(transcript_json(RunPaths(tmp_path), "t.jsonl")) == events
    (tmp_path / "t.jsonl").write_bytes(b"\n" + lines[0])
    assert orjson.loads(transcript_json(RunPaths(tmp_path), "t.jsonl")) == events[:1]
