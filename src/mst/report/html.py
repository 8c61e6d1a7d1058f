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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

import orjson

from mst import fileio
from mst.fileio import atomic_write_chunks
from mst.report.trials import CASES_PER_CHUNK, CaseList, ChunkStream, write_chunks
from mst.runs.record_files import read_record_file
from mst.runs.run import Run, open_run
from mst.runs.summary import Summary

REPORT_SCHEMA: Final = "mst.report/v1"
CHUNKS_DIR: Final = "report"  # beside report.html: report/<generation>/c<N>.js
FAVICON: Final = '<link rel="icon" href="data:,">\n'  # no request for /favicon.ico, from file:// or served
_STATUS_CODE: Final = {"passed": b"p", "failed": b"f", "incomplete": b"i"}


def read_summary(run: Run) -> tuple[Summary, dict[str, Any], Iterator[dict[str, Any]]]:
    """summary.json as the typed Summary, its head as written (for fields Summary does not
    type yet), and its case rows one at a time."""
    file = read_record_file(run.paths.summary, "summary.json", "cases")
    return Summary.from_json(file.head), file.head, (row for row, _ in file.records())


def _json(value: Any) -> bytes:
    """``value`` as the page embeds it: JSON with every ``</`` written ``<\\/``, so no
    ``</script>`` in the data can end its element early. Only a string can hold ``</`` (no JSON
    punctuation is ``<``), so escaping each whole value is escaping the whole payload."""
    return orjson.dumps(value).replace(b"</", b"<\\/")


@dataclass(slots=True)
class Matrix:
    """The case × variant matrix as columns: per variant a status string (one letter a case:
    ``p`` passed, ``f`` failed, ``i`` incomplete, ``-`` absent) and the pass rate, passed and
    graded counts; the page sorts and filters these without building an object per cell
    (docs/report.md, "What the page holds").

    Each column is kept as the page's JSON bytes of its elements, each followed by a comma
    (issue 16: no list of objects per case, no second copy of the payload): a case costs the
    bytes the page gives it, ~10 B of the id's and ~10 a variant."""

    variants: list[str]
    cases: bytearray = field(default_factory=bytearray)
    trials: bytearray = field(default_factory=bytearray)
    status: dict[str, bytearray] = field(default_factory=dict)
    rate: dict[str, bytearray] = field(default_factory=dict)
    passed: dict[str, bytearray] = field(default_factory=dict)
    graded: dict[str, bytearray] = field(default_factory=dict)
    ordered: bool = True  # the rows' case ids were the ``order`` given to :meth:`read`
    _expected: Iterator[str] | None = field(default=None, repr=False, compare=False)  # the ids still to come

    @classmethod
    def read(cls, variants: Sequence[str], rows: Iterable[Mapping[str, Any]],
             order: Iterable[str] | None = None) -> Matrix:
        """The matrix of summary.json's case ``rows``, read once; :attr:`ordered` tells whether
        their ids are ``order`` (the ids a :class:`ChunkStream` wrote, checked on the way)."""
        m = cls.start(variants, order)
        for row in rows:
            m.add_row(row)
        return m.done()

    @classmethod
    def start(cls, variants: Sequence[str], order: Iterable[str] | None = None) -> Matrix:
        """An empty matrix, its rows added by :meth:`add_row` as they are made (the summary's,
        while summary.json is written: the page then reads no row back), then :meth:`done`."""
        m = cls(list(variants), _expected=iter(order) if order is not None else None)
        for name in ("status", "rate", "passed", "graded"):
            getattr(m, name).update((v, bytearray()) for v in m.variants)
        return m

    def add_row(self, row: Mapping[str, Any]) -> None:
        """The next summary.json case row (as written, or as read back: the same bytes here)."""
        case_id = str(row["id"])
        if self._expected is not None and self.ordered and next(self._expected, None) != case_id:
            self.ordered = False
        self.cases += _json(case_id) + b","
        self.trials += b"%d," % int(row.get("trials") or 0)
        cells = row.get("variants") or {}
        for v in self.variants:
            self._add_cell(v, cells.get(v))

    def done(self) -> Matrix:
        """The matrix, every row added: not :attr:`ordered` when ``order`` has ids left."""
        if self._expected is not None and next(self._expected, None) is not None:
            self.ordered = False
        self._expected = None
        return self

    def _add_cell(self, v: str, cell: Any) -> None:
        if cell.__class__ is not dict and not isinstance(cell, Mapping):  # rows are dicts: no ABC check
            self.status[v] += b"-"
            self.rate[v] += b"null,"
            self.passed[v] += b"0,"
            self.graded[v] += b"0,"
            return
        self.status[v] += _STATUS_CODE.get(str(cell.get("status")), b"-")
        self.rate[v] += _json(cell.get("passRate")) + b","
        self.passed[v] += b"%d," % int(cell.get("passed") or 0)
        self.graded[v] += b"%d," % int(cell.get("graded") or 0)

    def case_ids(self) -> list[str]:
        """The case ids, in the rows' order (decoded from the page's bytes: ``<\\/`` is ``</``)."""
        return list(orjson.loads(b"[" + self.cases[:-1] + b"]"))

    def pieces(self) -> Iterator[bytes | memoryview]:
        """The matrix's JSON object (as ``orjson.dumps`` of its dict writes it), in pieces of at
        most :data:`mst.fileio.IO_BLOCK` bytes; each column's bytes are sliced, not copied."""
        yield b'{"cases":['
        yield from _column(self.cases)
        yield b'],"trials":['
        yield from _column(self.trials)
        yield b'],"variants":' + _json(self.variants) + b',"status":{'
        for i, v in enumerate(self.variants):
            yield (b"," if i else b"") + _json(v) + b':"'
            yield from _slices(memoryview(self.status[v]))
            yield b'"'
        for name in ("rate", "passed", "graded"):
            yield b'},"' + name.encode() + b'":{'
            for i, v in enumerate(self.variants):
                yield (b"," if i else b"") + _json(v) + b":["
                yield from _column(getattr(self, name)[v])
                yield b"]"
        yield b"}}"


def _column(elements: bytearray) -> Iterator[memoryview]:
    """A column's elements without the comma after the last."""
    return _slices(memoryview(elements)[:-1])


def _slices(view: memoryview) -> Iterator[memoryview]:
    block = fileio.IO_BLOCK
    for start in range(0, len(view), block):
        yield view[start:start + block]


@dataclass(frozen=True, slots=True)
class PageData:
    """Everything the page shows (docs/report.md, "What the page holds"): the summary as the
    terminal prints it, the matrix, where the chunks are."""

    summary: dict[str, Any]
    matrix: Matrix
    chunks: str

    @classmethod
    def of(cls, summary: Summary, head: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], chunks: str,
           order: Iterable[str] | None = None) -> PageData:
        return cls.made(summary, head, Matrix.read([v.id for v in summary.variants], rows, order), chunks)

    @classmethod
    def made(cls, summary: Summary, head: Mapping[str, Any], matrix: Matrix, chunks: str) -> PageData:
        """The page of ``summary`` (``head``: summary.json's head, as written) and its rows' ``matrix``."""
        shown = summary.to_json()
        if head.get("judgeUsage") is not None:  # run-level judge tokens and cost, when judges report them
            shown["judgeUsage"] = head["judgeUsage"]
        return cls(shown, matrix, chunks)

    def data(self) -> Iterator[bytes | memoryview]:
        """The page's data, one JSON object, in pieces (docs/report.md)."""
        yield b'{"schema":' + _json(REPORT_SCHEMA) + b',"summary":' + _json(self.summary) + b',"matrix":'
        yield from self.matrix.pieces()
        yield b',"chunks":' + _json({"path": self.chunks, "casesPerChunk": CASES_PER_CHUNK}) + b"}"


def _asset(name: str) -> str:
    return resources.files("mst.report").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(page: PageData) -> Iterator[bytes | memoryview]:
    """The HTML page, in pieces to write one after another (never joined: issue 16): inline
    stylesheet and script, the data as a JSON script element."""
    title = _escape(f"{page.summary['eval']} · {page.summary['run']}")
    yield (b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
           b'<meta name="viewport" content="width=device-width, initial-scale=1">\n' + FAVICON.encode()
           + f"<title>{title}</title>\n<style>\n".encode() + _asset("report.css").encode() + b"</style>\n</head>\n"
           b'<body>\n<div id="app"><p class="loading">Loading the report&hellip;</p></div>\n'
           b'<script type="application/json" id="mst-data">')
    yield from page.data()
    yield b"</script>\n<script>\n" + _asset("report.js").encode() + b"</script>\n</body></html>\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def stream_chunks(run: Run, cases: Sequence[tuple[str, int]], variants: Sequence[str]) -> ChunkStream:
    """The chunks of a new generation, to be written while grading goes case by case (``cases``
    as ``(id, trials)`` in the eval's order, ``variants`` its variant ids) and named by the page
    :func:`write_report` then writes."""
    generation = secrets.token_hex(4)
    return ChunkStream(run, CaseList(cases), sorted(variants), run.paths.root / CHUNKS_DIR / generation)


def write_report(run: Run | Path, chunks: ChunkStream | None = None,
                 matrix: Matrix | None = None) -> Path:
    """Write ``report.html`` (and its trial chunks) for a finished phase of ``run``; its path.
    ``chunks``, written while grading (:func:`stream_chunks`), are used when they hold what the
    page shows; otherwise they are written here, from the run's files. ``matrix``: summary.json's
    rows' matrix, made as they were written (:meth:`Matrix.start`, in ``chunks``' case order), so
    only the file's head is read back; otherwise its rows are read too."""
    if isinstance(run, Path):
        run = open_run(run)
    generation = chunks.folder.name if chunks is not None else secrets.token_hex(4)
    root = run.paths.root / CHUNKS_DIR
    streamed = chunks is not None and chunks.close()
    shown = f"{CHUNKS_DIR}/{generation}"
    summary, head, rows = read_summary(run)  # the rows are read only when iterated
    if matrix is not None:
        page = PageData.made(summary, head, matrix, shown)
    else:
        order = (case for case, _ in chunks.cases) if streamed and chunks is not None else None
        page = PageData.of(summary, head, rows, shown, order)
    if not (streamed and page.matrix.ordered):
        shutil.rmtree(root / generation, ignore_errors=True)  # a stream that cannot serve: none of its files
        write_chunks(run, page.matrix.case_ids(), root / generation)
    atomic_write_chunks(run.paths.report, render_page(page))
    for old in root.iterdir():
        if old.name != generation and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return run.paths.report
