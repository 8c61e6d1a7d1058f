"""The report in a real headless Chromium (Debian's package, driven through its DevTools
protocol): it loads with no console errors, every chart renders, the numbers shown equal
summary.json's, a click on a cell opens the trial, 10,000 cases × 3 variants open and respond
within 2 s, and `mst view` serves it all. Screenshots of the main views go to
tests/output/report/ (ignored by git)."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.helpers import ROOT, load
from tests.report.browser import Chromium, Page

from mst.report.html import PageData, render_page
from mst.report.serve import start_viewer
from mst.runs.record_files import read_record_file
from mst.runs.summary import Summary

pytestmark = pytest.mark.slow
SHOTS = ROOT / "tests" / "output" / "report"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    browser = Chromium()
    yield browser
    browser.close()


@pytest.fixture
def page(chromium: Chromium) -> Iterator[Page]:
    tab = chromium.page()
    yield tab
    tab.close()


def shot(page: Page, name: str) -> None:
    path = page.screenshot(SHOTS / name)
    print(f"screenshot: {path}")


def open_report(page: Page, url: str) -> None:
    page.navigate(url)
    page.wait_for("document.body.dataset.ready === '1'")
    assert page.errors == []


def values(page: Page, selector: str) -> list[Any]:
    return list(page.evaluate(f"[...document.querySelectorAll({json.dumps(selector)})]"
                              ".map(e => e.dataset.value === undefined ? null : JSON.parse(e.dataset.value))"))


def test_the_report_shows_summary_json(page: Page, report_run: Path) -> None:
    summary = load(report_run / "summary.json")
    open_report(page, (report_run / "report.html").as_uri())
    shot(page, "overview.png")
    variants = summary["variants"]
    assert values(page, "#variants td.passRate") == [v["passRate"]["estimate"] for v in variants]
    assert values(page, "#variants td.cases") == [[v["cases"][k] for k in ("passed", "failed", "incomplete")]
                                                  for v in variants]
    assert values(page, "#variants td.trials") == [v["trials"]["total"] for v in variants]
    assert values(page, "#variants td.infra") == [v["infrastructure"]["total"] for v in variants]
    assert values(page, "#totals td") == [summary["totals"][k] for k in ("attempts", "trials", "cases",
                                                                         "incompleteCases", "infrastructureFailures")]
    texts = page.evaluate("[...document.querySelectorAll('#variants td.passRate')].map(e => e.textContent)")
    for text, v in zip(texts, variants, strict=True):
        assert text.startswith(f"{100 * v['passRate']['estimate']:.1f}%")
    cand = next(v for v in variants if not v["baseline"])
    for ref, metric in cand["comparison"]["metrics"].items():
        row = f'table.comparison[data-variant="cand"] tr[data-metric="{ref}"]'
        assert values(page, row + " td.difference") == [metric["difference"]]
        assert values(page, row + " td.p") == [metric["p"]]
        assert values(page, row + " td.decision") == [metric["decision"]]
    pw = cand["pairwise"]
    assert [values(page, f"#pairwise td.{k}")[0] for k in ("wins", "ties", "losses")] == \
        [pw["wins"], pw["ties"], pw["losses"]]
    assert values(page, "#pairwise td.winRate") == [pw["winRate"]["estimate"]]
    assert values(page, "#pairwise td.flips") == [pw["flips"]["rate"]]
    for grader, figures in cand["graders"].items():
        cells = values(page, f'#graders tr[data-grader="{grader}"] td')
        assert cells == [None, next(v for v in variants if v["baseline"])["graders"][grader]["mean"], figures["mean"]]
    fixes = sum(len(v["needsFix"]) for v in variants)
    assert fixes and page.evaluate("document.querySelectorAll('#needs-fix tr').length") == fixes + 1
    # every chart is drawn: each estimate with a value has its dot, each interval its line
    charts = page.evaluate("[...document.querySelectorAll('svg.chart')].map(s => [s.dataset.chart,"
                           " s.getBoundingClientRect().width, s.querySelectorAll('g.row').length,"
                           " [...s.querySelectorAll('g.row')].filter(g => g.dataset.value !== undefined"
                           " && !g.querySelector('circle.est')).length])")
    names = [c[0] for c in charts]
    assert {"passRate", "diff-passRate", "winRate"} <= set(names)
    assert {f"grader-{g}" for g in cand["graders"]} <= set(names)
    for name, width, rows, undrawn in charts:
        assert width > 0 and rows > 0 and undrawn == 0, name
    shot_matrix(page)


def shot_matrix(page: Page) -> None:
    page.evaluate("document.querySelector('#grid').scrollIntoView()")
    shot(page, "matrix.png")


def test_a_click_on_a_cell_opens_the_trial(page: Page, report_run: Path) -> None:
    results = {(r["variant"], r["case"], r["trial"]): r for r in load(report_run / "results.json")["trials"]}
    open_report(page, (report_run / "report.html").as_uri())
    page.click('.cell[data-variant="cand"][data-index="0"]')
    page.wait_for("document.querySelector('#trial .transcript') !== null")
    shot(page, "trial.png")
    text = page.evaluate("document.querySelector('#trial').innerText")
    assert "say 0" in text  # the user's message, from the transcript
    verdicts = results[("cand", "case-00", 0)]["verdicts"]
    assert page.evaluate("document.querySelectorAll('#trial table.verdicts tr').length") == len(verdicts) + 1
    for verdict in verdicts:
        assert verdict["judge"] in text and (verdict["reason"] or "") in text
    assert "Pairwise against base" in text
    page.click('#trial .tabs button[data-trial="cand/1"]')
    assert page.evaluate("document.querySelector('#trial .tabs button.on').dataset.trial") == "cand/1"
    page.click('#needs-fix a[data-open]')  # a needs-fix entry opens its case too
    page.wait_for("document.querySelector('#trial h2').textContent.startsWith('case-03')")
    page.wait_for("document.querySelector('#trial table.ending') !== null")
    assert "setup" in page.evaluate("document.querySelector('#trial table.ending').innerText")
    assert page.errors == []


# A trial with every kind of event, for the scale page's first case: tool calls with input and
# output, model requests with tokens and durations, a cut transcript's marker.
TRIAL = {
    "attempt": {"variant": "v0", "case": "case-00000", "trial": 0, "try": 1, "answer": "four",
                "ending": {"kind": "trial", "outcome": "completed"}, "durationMs": 1234.0,
                "usage": {"inputTokens": 50}, "transcript": "transcripts/v0/case-00000/0.jsonl", "artifacts": None},
    "grade": {"variant": "v0", "case": "case-00000", "trial": 0, "verdicts": [
        {"judge": "equals", "kind": "assertion", "passed": True, "score": None, "reason": "the answer equals 'four'"},
        {"judge": "rubric", "kind": "llm", "passed": False, "score": 0.25, "reason": "too terse", "model": "judge-m",
         "inputTokens": 410, "outputTokens": 22, "latencyMs": 640, "costUsd": 0.0021, "votes": [{}, {}, {}]}],
        "errors": []},
    "transcript": [
        {"type": "user.message", "data": {"content": "add two and two"}, "provenance": {}},
        {"type": "model.request", "data": {"model": "m-1", "requestIndex": 0, "inputTokens": 31,
                                           "outputTokens": 7, "durationMs": 812}, "provenance": {}},
        {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "add", "input": {"a": 2, "b": 2},
                                                  "mcpServerName": "calc"}, "provenance": {}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "toolName": "add", "success": True,
                                                     "output": "sum-is-4", "durationMs": 9}, "provenance": {}},
        {"type": "report.cut", "data": {"text": "[… 7 events cut: over budget …]", "events": 7}, "provenance": {}},
        {"type": "session.result", "data": {"answer": "four", "outcome": "completed", "turns": 2}, "provenance": {}},
    ],
    "artifacts": {"files": [["artifacts/v0/case-00000/0/out.txt", 12]], "more": 0},
}


def big_report(source: Path, directory: Path, cases: int = 10_000, variants: int = 3) -> Path:
    """A report page of ``cases`` × ``variants`` from a real run's summary (its figures copied to
    each variant), with one chunk holding :data:`TRIAL`."""
    head = read_record_file(source / "summary.json", "summary.json", "cases").head
    base, cand = head["variants"][0], next(v for v in head["variants"] if not v["baseline"])
    # The copied variants' own judge figures are dropped: the page shows exactly the one set below.
    head["variants"] = [{**(base if i == 0 else cand), "id": f"v{i}", "judges": {}} for i in range(variants)]
    head["variants"][1]["infrastructure"] = {"total": 3, "retryable": 1, "byWhat": {"network": 1, "setup": 2}}
    head["judgeUsage"] = {"inputTokens": 1200, "outputTokens": 340, "costUsd": 0.0123}
    head["variants"][1]["judges"] = {"rubric": {"passed": 7, "graded": 9, "passRate": 7 / 9, "interval": [0.45, 0.94],
                                                "inputTokens": 1200, "outputTokens": 340, "costUsd": 0.0123}}
    rng = random.Random(1)

    def rows() -> Iterator[dict[str, Any]]:
        for c in range(cases):
            cells = {}
            for i in range(variants):
                passed = rng.randint(0, 2)
                status = "incomplete" if rng.random() < 0.02 else ("passed" if passed == 2 else "failed")
                cells[f"v{i}"] = {"status": status, "trials": 2, "graded": 2, "passed": passed, "passRate": passed / 2}
            yield {"id": f"case-{c:05d}", "trials": 2, "variants": cells}

    page = PageData.of(Summary.from_json(head), head, rows(), "report/big")
    (directory / "report" / "big").mkdir(parents=True)
    (directory / "report" / "big" / "c0.js").write_bytes(
        b"mstChunk(" + orjson.dumps({"case-00000": {"trials": {"v0/0": TRIAL}, "pairs": {}}}) + b");")
    (directory / "report.html").write_bytes(b"".join(render_page(page)))
    return directory / "report.html"


def test_ten_thousand_cases_by_three_variants_open_within_two_seconds(page: Page, report_run: Path,
                                                                        tmp_path: Path) -> None:
    report = big_report(report_run, tmp_path)
    page.navigate("about:blank")
    seconds = page.navigate(report.as_uri())
    page.wait_for("document.body.dataset.ready === '1'")
    ready_ms = int(page.evaluate("document.body.dataset.readyMs"))
    print(f"10,000 × 3: load event {seconds:.2f} s, interactive at {ready_ms} ms, {report.stat().st_size} bytes")
    assert ready_ms <= 2000 and page.errors == []
    assert page.evaluate("document.querySelector('#grid-count').textContent") == "10000 of 10000 cases"
    assert page.evaluate("document.querySelectorAll('#grid .grow').length") < 200  # only the rows in view
    # sort by a candidate's difference from the baseline, then keep the cases that differ
    took = page.evaluate("(() => { const t = performance.now();"
                         " document.querySelector('[data-sort=\"d:v1\"]').click(); return performance.now() - t; })()")
    first = page.evaluate("document.querySelector('#grid .grow').dataset.case")
    assert took < 1000
    took = page.evaluate("(() => { const t = performance.now(); const s = document.querySelector('#show');"
                         " s.value = 'differs'; s.dispatchEvent(new Event('change'));"
                         " return performance.now() - t; })()")
    differing = page.evaluate("document.querySelector('#grid-count').textContent")
    print(f"sort by Δ and filter: {took:.0f} ms; first after sorting {first}; {differing}")
    assert took < 1000 and 0 < int(differing.split()[0]) < 10_000
    assert page.evaluate("document.querySelectorAll('#judges tr').length") == 2
    assert values(page, "#judge-usage td") == [1200, 340, 0.0123]
    assert "network: 1, setup: 2" in page.evaluate("document.querySelector('#infra').innerText")
    page.evaluate("const g = document.querySelector('#grid'); g.scrollTop = g.scrollHeight;"
                  " g.dispatchEvent(new Event('scroll'))")
    page.wait_for("[...document.querySelectorAll('#grid .grow')].length > 0")
    shot(page, "big-matrix.png")
    # the first case's trial: tool call input and output, model request tokens and duration, the cut marker
    page.evaluate("const s = document.querySelector('#show'); s.value = 'all'; s.dispatchEvent(new Event('change'));"
                  " document.querySelector('[data-sort=\"case\"]').click();")
    page.click('.cell[data-variant="v0"][data-index="0"]')
    page.wait_for("document.querySelector('#trial .transcript') !== null")
    text = page.evaluate("document.querySelector('#trial').textContent")
    shot(page, "big-trial.png")
    for expected in ('"a": 2', "sum-is-4", "add (calc)", "9 ms", "in 31 / out 7 tokens", "812 ms",
                     "[… 7 events cut: over budget …]", "the answer equals 'four'", "out.txt",
                     "judge-m", "410 / 22", "640 ms", "$0.0021", "too terse"):
        assert expected in text, expected
    assert page.errors == []


def test_mst_view_serves_an_index_and_the_reports(page: Page, report_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(report_run, runs / report_run.name)
    (runs / report_run.name / "report.html").unlink()  # written when first asked for
    viewer = start_viewer(runs)
    try:
        open_report_index(page, viewer.url)
        page.click(f'#runs a[href^="{report_run.name}"]')
        page.wait_for("document.body.dataset.ready === '1'")
        assert page.evaluate("location.href") == f"{viewer.url}{report_run.name}/report.html"
        page.click('.cell[data-variant="base"][data-index="1"]')
        page.wait_for("document.querySelector('#trial .transcript') !== null")
        assert "say 1" in page.evaluate("document.querySelector('#trial').innerText")
        assert page.errors == []
    finally:
        viewer.stop()


def open_report_index(page: Page, url: str) -> None:
    page.navigate(url)
    page.wait_for("document.querySelector('#runs') !== null")
    shot(page, "view-index.png")


def test_a_real_transcript_shows_its_tool_calls_and_model_requests(page: Page, tmp_path: Path) -> None:
    """The quickstart (a real MCP server over stdio): what its transcripts hold is what the trial shows."""
    from tests.helpers import only_run, run_cli

    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "qs")
    done = run_cli("run", "eval.yaml", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path / "qs", timeout=300)
    assert done.returncode in (0, 3), done.stderr
    run = only_run(tmp_path / "runs")
    open_report(page, (run / "report.html").as_uri())
    page.click('.grow[data-case="hammer-price"] .cell[data-variant="baseline"]')
    page.wait_for("document.querySelector('#trial .transcript') !== null")
    shot(page, "quickstart-trial.png")
    text = page.evaluate("document.querySelector('#trial .transcript').textContent")
    events = [orjson.loads(line) for line in
              (run / "transcripts" / "baseline" / "hammer-price" / "0.jsonl").read_bytes().splitlines()]
    starts = [e["data"] for e in events if e["type"] == "tool.execution_start"]
    completes = {e["data"]["toolCallId"]: e["data"] for e in events if e["type"] == "tool.execution_complete"}
    assert starts
    for start in starts:
        done_call = completes[start["toolCallId"]]
        assert f"tool call · {start['toolName']} ({start['mcpServerName']}) · {done_call['durationMs']} ms" in text
        assert json.dumps(start["input"], indent=2) in text and done_call["output"] in text
    for request in (e["data"] for e in events if e["type"] == "model.request"):
        tokens = f"in {request['inputTokens']} / out {request['outputTokens']} tokens"
        assert f"{tokens} · {request['durationMs']} ms" in text
    assert page.errors == []


@pytest.mark.parametrize("extra", [[], ["--no-grade"]], ids=["one-variant", "collected-only"])
def test_a_run_without_baseline_or_grades_renders_too(page: Page, tmp_path: Path, extra: list[str]) -> None:
    from tests.helpers import basic_eval, mock_variant, only_run, run_cli, write_eval

    path = write_eval(tmp_path, basic_eval(variants=[mock_variant("solo")]))
    done = run_cli("run", str(path), "--runs-dir", str(tmp_path / "runs"), *extra, cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr
    run = only_run(tmp_path / "runs")
    open_report(page, (run / "report.html").as_uri())
    summary = load(run / "summary.json")
    assert values(page, "#variants td.passRate") == [summary["variants"][0]["passRate"]["estimate"]]
    assert page.evaluate("document.querySelector('table.comparison, #pairwise')") is None
    status = "i" if extra else None
    cells = page.evaluate("[...document.querySelectorAll('#grid .cell')].map(c => c.dataset.status)")
    assert len(cells) == 2 and (status is None or cells == [status, status])
    page.click('.cell[data-variant="solo"][data-index="0"]')
    page.wait_for("document.querySelector('#trial .transcript') !== null")
    graded = page.evaluate("document.querySelector('#trial').textContent")
    assert ("Not graded." in graded) == bool(extra)
    assert page.errors == []
