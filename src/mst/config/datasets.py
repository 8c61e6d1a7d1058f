"""Cases from files (JSONL, CSV, YAML) or from a `mst.datasets` plugin.

A loader returns raw case mappings, each with the place it came from, so a bad case is named by
file and line. Built-in formats are looked up directly (entry-point scanning costs ~10 ms).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from mst.config.errors import Problem, UserError
from mst.config.files import decode_utf8, read_file
from mst.config.plugins import DATASETS, UnknownPlugin, load
from mst.config.yamlfile import child, data_problems, parse_yaml, storable, subnode

RawCase = tuple[dict[str, Any], str]  # (case mapping, "file:line")
Loader = Callable[[Path | None, dict[str, Any]], Iterable[RawCase | dict[str, Any]]]


def _read(path: Path | None) -> bytes:
    if path is None:
        raise UserError(Problem("", "this dataset format needs a 'path'", "path"))
    return read_file(path, "dataset file", "a dataset file")


def load_jsonl(path: Path | None, options: dict[str, Any]) -> Iterator[RawCase]:
    """One case per line, each yielded as it is read (an eval may have tens of thousands). The
    lines are cut one at a time, not split into a list: 100,000 lines held at once were ~12 MB,
    most of `resolve_eval`'s peak (issue 16, bench/perf16_memory.md)."""
    raw = _read(path)
    at = f"{path}:"  # formatted once: a Path formats itself again each time
    for lineno, line in enumerate(io.BytesIO(raw), start=1):  # shares raw's bytes, cuts at b"\n" only
        if not line.strip():
            continue
        try:
            value = orjson.loads(line[:-1] if line.endswith(b"\n") else line)
        except orjson.JSONDecodeError as exc:
            raise UserError(Problem(str(path), f"not valid JSON ({exc.msg})", line=lineno)) from None
        if not isinstance(value, dict):
            raise UserError(Problem(str(path), "each line must be a JSON object (a case)", line=lineno))
        yield value, f"{at}{lineno}"


def load_csv(path: Path | None, options: dict[str, Any]) -> list[RawCase]:
    """Columns ``id``, ``prompt``, ``expected``; any other column goes into ``metadata``.

    The text is read as the csv module requires (``newline=""``): CRLF and CR line endings work,
    a CR inside a quoted field is kept, and a bare CR in an unquoted field ends the row.
    """
    raw = _read(path)
    text = decode_utf8(raw, str(path))
    delimiter = options.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
        raise UserError(Problem(str(path), "the CSV option 'delimiter' must be one character "
                                           f"(not a quote or a line break), got {delimiter!r}"))
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return _csv_cases(reader, str(path))
    except csv.Error as exc:
        raise UserError(Problem(str(path), f"malformed CSV: {exc}", line=reader.line_num)) from None


def _csv_cases(reader: csv.DictReader[str], path: str) -> list[RawCase]:
    out: list[RawCase] = []
    for row in reader:
        case: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for key, value in row.items():
            if key is None:
                raise UserError(Problem(path, "row has more fields than the header", line=reader.line_num))
            if key in ("id", "prompt", "expected"):
                if value not in (None, ""):
                    case[key] = value
            elif key == "trials" and value:
                case["trials"] = value
            elif value not in (None, ""):
                metadata[key] = value
        if metadata:
            case["metadata"] = metadata
        out.append((case, f"{path}:{reader.line_num}"))
    return out


def load_yaml(path: Path | None, options: dict[str, Any]) -> list[RawCase]:
    """A YAML list of cases, or a mapping with a ``cases`` list."""
    raw = _read(path)
    data, node = parse_yaml(raw, str(path))
    if isinstance(data, dict) and "cases" in data:
        data, node = data["cases"], subnode(node, ["cases"])
    if not isinstance(data, list):
        raise UserError(Problem(str(path), "expected a list of cases (or a mapping with 'cases')"))
    out: list[RawCase] = []
    for i, item in enumerate(data):
        item_node = child(node, i)
        line = item_node.start_mark.line + 1 if item_node is not None else None
        if not isinstance(item, dict):
            raise UserError(Problem(str(path), "each case must be a mapping", path=f"[{i}]", line=line))
        out.append((item, f"{path}:{line}" if line else f"{path}[{i}]"))
    return out


def loader_for(fmt: str, path: Path | None = None) -> Loader:
    """The loader of dataset format ``fmt``: a built-in, or a ``mst.datasets`` plugin. ``path`` is
    the file the format was read from (its extension), named in the error when it is unknown."""
    try:
        loaded: Loader = load(DATASETS, fmt)
    except UnknownPlugin as exc:
        if path is not None:
            raise UserError(Problem(str(path), f"{exc} (by its extension: set 'format')")) from None
        raise UserError(Problem("", f"{exc} (is a mst.datasets plugin of that name installed?)", "format")) from None
    return loaded


def load_dataset(path: Path | None, fmt: str | None, options: dict[str, Any]) -> Iterator[RawCase]:
    """The cases of one dataset, one at a time; a :class:`UserError` may come while iterating.

    Every case, whatever produced it (a plugin too), is checked for what a run cannot store
    (see :func:`mst.config.yamlfile.data_problems`): a JSONL line may nest 1,000 levels deep.
    """
    by_suffix = fmt is None
    if fmt is None:
        if path is None:
            raise UserError(Problem("", "give 'path' or 'format'", "path"))
        if _is_dir(path):
            raise UserError(Problem(str(path), "is a directory, expected a dataset file"))
        fmt = path.suffix.lstrip(".").lower()
        if fmt == "json":
            fmt = "jsonl"
    for item in loader_for(fmt, path if by_suffix else None)(path, options):
        case, where = item if isinstance(item, tuple) else (item, f"{path or fmt}")
        if not storable(case):
            file, _, line = where.rpartition(":")
            at = int(line) if line.isdigit() else None
            raise UserError([Problem(file if at else where, message, f"case {field}".rstrip(), at)
                             for _, field, message in data_problems(case)])
        yield case, where


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long, say: reading the file names the problem
        return False
