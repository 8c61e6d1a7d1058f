"""``mst view``: the reports of every run in a runs directory, served on 127.0.0.1 (docs/report.md).

A stdlib HTTP server in a thread: ``/`` is an index of the runs (id, eval, started, phases, pass
rate per variant, newest first), and every other path is a file of the runs directory, so a
run's ``report.html`` and its trial chunks, transcripts and artifacts load as they do from
``file://``. A report that is missing or older than its run's ``summary.json`` (a run made before
reports existed, or graded since) is written when first asked for.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from mst.config.errors import Problem, UserError
from mst.report.html import FAVICON, write_report
from mst.runs.record_files import read_record_file
from mst.runs.run import open_run

_LOCK = threading.Lock()  # one report written at a time (two requests for a stale one write it once)


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One row of the index: what ``summary.json`` and ``run.json`` say of a run."""

    id: str
    eval: str
    started: str
    phases: Mapping[str, str]
    regrade_of: str | None
    pass_rates: tuple[tuple[str, float | None], ...]


def list_runs(runs_dir: Path) -> list[RunEntry]:
    """The runs under ``runs_dir`` with a summary, newest first (a run id starts with its UTC time)."""
    out: list[RunEntry] = []
    for folder in sorted(runs_dir.iterdir(), reverse=True) if runs_dir.is_dir() else ():
        if not (folder / "summary.json").is_file() or folder.name.startswith("."):
            continue
        try:
            summary = read_record_file(folder / "summary.json", "summary.json", "cases").head
            meta = read_record_file(folder / "run.json", "run.json", "attempts").head
        except UserError:
            continue  # a damaged run is not a report; `mst report` on it names the problem
        rates = tuple((str(v["id"]), (v.get("passRate") or {}).get("estimate")) for v in summary.get("variants", []))
        out.append(RunEntry(folder.name, str(summary.get("eval", "")), str(meta.get("createdAt", "")),
                            dict(summary.get("phases") or {}), summary.get("regradeOf"), rates))
    return out


def index_page(runs: list[RunEntry]) -> bytes:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{100 * value:.1f}%"

    rows = "".join(
        f'<tr><td class="l"><a href="{quote(r.id)}/report.html">{html.escape(r.id)}</a></td>'
        f'<td class="l">{html.escape(r.eval)}</td><td class="l">{html.escape(r.started)}</td>'
        f'<td class="l">collect {html.escape(str(r.phases.get("collect")))}, '
        f'grade {html.escape(str(r.phases.get("grade")))}'
        f"{' · regrade of ' + html.escape(r.regrade_of) if r.regrade_of else ''}</td>"
        f'<td class="l">{", ".join(html.escape(v) + " " + pct(p) for v, p in r.pass_rates)}</td></tr>'
        for r in runs)
    body = (f'<h1>Runs</h1><table id="runs"><tr><th class="l">run</th><th class="l">eval</th><th class="l">started</th>'
            f'<th class="l">phases</th><th class="l">pass rate per variant</th></tr>{rows}</table>'
            if runs else "<h1>Runs</h1><p>No runs with a summary here yet.</p>")
    style = "body{font:14px system-ui,sans-serif;margin:24px}td,th{border:1px solid #ddd;padding:3px 8px}" \
            "table{border-collapse:collapse}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>mst runs</title>{FAVICON}'
            f"<style>{style}</style></head><body>{body}</body></html>").encode()


def fresh_report(run_dir: Path) -> Path:
    """The run's ``report.html``, written first when missing or older than ``summary.json``."""
    report, summary = run_dir / "report.html", run_dir / "summary.json"
    with _LOCK:
        if not report.is_file() or report.stat().st_mtime < summary.stat().st_mtime:
            write_report(open_run(run_dir))
    return report


class _Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, runs_dir: Path, **kwargs: Any) -> None:
        self.runs_dir = runs_dir
        super().__init__(*args, directory=str(runs_dir), **kwargs)

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path in ("/", "/index.html"):
            self._send(index_page(list_runs(self.runs_dir)))
            return
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[1] == "report.html" and (self.runs_dir / parts[0] / "summary.json").is_file() \
                and not parts[0].startswith("."):
            try:
                fresh_report(self.runs_dir / parts[0])
            except UserError as exc:
                self.send_error(500, f"cannot write the report: {exc}")
                return
        super().do_GET()

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the command prints the URL only
        return


@dataclass
class Viewer:
    """A running server: its URL, and how to stop it."""

    server: ThreadingHTTPServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def start_viewer(runs_dir: Path, port: int = 0) -> Viewer:
    """Serve ``runs_dir`` on 127.0.0.1:``port`` (0: any free port) in a daemon thread."""
    if not runs_dir.is_dir():
        raise UserError(Problem(str(runs_dir), "not a runs directory (it does not exist)"))
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(_Handler, runs_dir=runs_dir.resolve()))
    thread = threading.Thread(target=server.serve_forever, name="mst-view", daemon=True)
    thread.start()
    return Viewer(server, thread)
