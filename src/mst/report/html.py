"""``report.html``: the run's self-contained HTML report (docs/report.md).

It shows the same typed :class:`~mst.runs.summary.Summary` the terminal prints, embedded as JSON
with the case × variant matrix (one column per variant, so 10,000 cases × 3 variants stay a few
hundred kilobytes), and a small hand-written script and stylesheet inlined from ``assets/``: no
CDN, no network, it opens from ``file://``. Each trial's evidence is in chunk files beside it
(:mod:`mst.report.trials`).

Writing is atomic for a reader: the chunks go to a new generation folder ``report/<gen>/``, then
``report.html`` (naming that folder) replaces the old page by rename, then older generations are
removed. A reader sees the old report or the new one, never a page pointing at missing chunks.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final

import orjson

from mst.fileio import atomic_write_bytes
from mst.report.trials import CASES_PER_CHUNK, ChunkStream, write_chunks
from mst.runs.record_files import read_record_file
from mst.runs.run import Run, open_run
from mst.runs.summary import Summary

REPORT_SCHEMA: Final = "mst.report/v1"
CHUNKS_DIR: Final = "report"  # beside report.html: report/<generation>/c<N>.js
FAVICON: Final = '<link rel="icon" href="data:,">\n'  # no request for /favicon.ico, from file:// or served
_STATUS_CODE: Final = {"passed": "p", "failed": "f", "incomplete": "i"}


def read_summary(run: Run) -> tuple[Summary, dict[str, Any], Iterator[dict[str, Any]]]:
    """summary.json as the typed Summary, its head as written (for fields Summary does not
    type yet), and its case rows one at a time."""
    file = read_record_file(run.paths.summary, "summary.json", "cases")
    return Summary.from_json(file.head), file.head, (row for row, _ in file.records())


def matrix(summary: Summary, rows: Iterator[Mapping[str, Any]]) -> dict[str, Any]:
    """The case × variant matrix as columns: per variant a status string (one letter a case:
    ``p`` passed, ``f`` failed, ``i`` incomplete, ``-`` absent) and the pass rate, passed and
    graded counts; the page sorts and filters these without building an object per cell."""
    variants = [v.id for v in summary.variants]
    ids: list[str] = []
    trials: list[int] = []
    status: dict[str, list[str]] = {v: [] for v in variants}
    rate: dict[str, list[float | None]] = {v: [] for v in variants}
    passed: dict[str, list[int]] = {v: [] for v in variants}
    graded: dict[str, list[int]] = {v: [] for v in variants}
    for row in rows:
        ids.append(str(row["id"]))
        trials.append(int(row.get("trials") or 0))
        cells = row.get("variants") or {}
        for v in variants:
            cell = cells.get(v)
            if cell.__class__ is not dict and not isinstance(cell, Mapping):  # rows are dicts: no ABC check
                status[v].append("-")
                rate[v].append(None)
                passed[v].append(0)
                graded[v].append(0)
                continue
            status[v].append(_STATUS_CODE.get(str(cell.get("status")), "-"))
            rate[v].append(cell.get("passRate"))
            passed[v].append(int(cell.get("passed") or 0))
            graded[v].append(int(cell.get("graded") or 0))
    return {"cases": ids, "trials": trials, "variants": variants,
            "status": {v: "".join(s) for v, s in status.items()}, "rate": rate, "passed": passed, "graded": graded}


def page_data(summary: Summary, head: Mapping[str, Any], rows: Iterator[Mapping[str, Any]],
              chunks: str) -> dict[str, Any]:
    """Everything the page shows, as one JSON object (docs/report.md, "What the page holds")."""
    shown = summary.to_json()
    if head.get("judgeUsage") is not None:  # run-level judge tokens and cost, when judges report them
        shown["judgeUsage"] = head["judgeUsage"]
    return {"schema": REPORT_SCHEMA, "summary": shown, "matrix": matrix(summary, rows),
            "chunks": {"path": chunks, "casesPerChunk": CASES_PER_CHUNK}}


def _asset(name: str) -> str:
    return resources.files("mst.report").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(data: Mapping[str, Any]) -> bytes:
    """The HTML page: inline stylesheet and script, the data as a JSON script element."""
    payload = orjson.dumps(data).replace(b"</", b"<\\/")  # no "</script>" can end the element early
    title = _escape(f"{data['summary']['eval']} · {data['summary']['run']}")
    return b"".join([
        b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n',
        b'<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        FAVICON.encode(),
        f"<title>{title}</title>\n<style>\n".encode(), _asset("report.css").encode(), b"</style>\n</head>\n",
        b'<body>\n<div id="app"><p class="loading">Loading the report&hellip;</p></div>\n',
        b'<script type="application/json" id="mst-data">', payload, b"</script>\n<script>\n",
        _asset("report.js").encode(), b"</script>\n</body></html>\n",
    ])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def stream_chunks(run: Run, cases: Sequence[tuple[str, int]], variants: Sequence[str]) -> ChunkStream:
    """The chunks of a new generation, to be written while grading goes case by case (``cases``
    as ``(id, trials)`` in the eval's order, ``variants`` its variant ids) and named by the page
    :func:`write_report` then writes."""
    generation = secrets.token_hex(4)
    return ChunkStream(run, cases, sorted(variants), run.paths.root / CHUNKS_DIR / generation)


def write_report(run: Run | Path, chunks: ChunkStream | None = None) -> Path:
    """Write ``report.html`` (and its trial chunks) for a finished phase of ``run``; its path.
    ``chunks``, written while grading (:func:`stream_chunks`), are used when they hold what the
    page shows; otherwise they are written here, from the run's files."""
    if isinstance(run, Path):
        run = open_run(run)
    summary, head, rows = read_summary(run)
    generation = chunks.folder.name if chunks is not None else secrets.token_hex(4)
    root = run.paths.root / CHUNKS_DIR
    data = page_data(summary, head, rows, f"{CHUNKS_DIR}/{generation}")
    if chunks is None or not chunks.close() or chunks.case_ids != data["matrix"]["cases"]:
        shutil.rmtree(root / generation, ignore_errors=True)  # a stream that cannot serve: none of its files
        write_chunks(run, data["matrix"]["cases"], root / generation)
    atomic_write_bytes(run.paths.report, render_page(data))
    for old in root.iterdir():
        if old.name != generation and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return run.paths.report
