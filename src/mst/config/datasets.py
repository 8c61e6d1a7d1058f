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
import yaml

from mst.config.errors import Problem, UserError
from mst.config.plugins import DATASETS, UnknownPlugin, load

RawCase = tuple[dict[str, Any], str]  # (case mapping, "file:line")
Loader = Callable[[Path | None, dict[str, Any]], Iterable[RawCase | dict[str, Any]]]


def _read(path: Path | None) -> bytes:
    if path is None:
        raise UserError("this dataset format needs a 'path'")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(Problem(str(path), "dataset file not found")) from None
    except IsADirectoryError:
        raise UserError(Problem(str(path), "is a directory, expected a dataset file")) from None


def load_jsonl(path: Path | None, options: dict[str, Any]) -> Iterator[RawCase]:
    """One case per line, each yielded as it is read (an eval may have tens of thousands)."""
    raw = _read(path)
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UserError(Problem(str(path), f"not valid JSON ({exc.msg})", line=lineno)) from None
        if not isinstance(value, dict):
            raise UserError(Problem(str(path), "each line must be a JSON object (a case)", line=lineno))
        yield value, f"{path}:{lineno}"


def load_csv(path: Path | None, options: dict[str, Any]) -> list[RawCase]:
    """Columns ``id``, ``prompt``, ``expected``; any other column goes into ``metadata``."""
    text = _read(path).decode("utf-8-sig")
    reader = csv.DictReader(io.StringIO(text), delimiter=str(options.get("delimiter", ",")))
    out: list[RawCase] = []
    for row in reader:
        case: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for key, value in row.items():
            if key is None:
                raise UserError(Problem(str(path), "row has more fields than the header", line=reader.line_num))
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
    try:
        node = yaml.compose(raw.decode("utf-8"), Loader=yaml.SafeLoader)
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(Problem(str(path), f"malformed YAML: {getattr(exc, 'problem', exc)}",
                                line=mark.line + 1 if mark else None)) from None
    if isinstance(data, dict) and "cases" in data:
        data = data["cases"]
        node = next((v for k, v in node.value if k.value == "cases"), None) if node is not None else None
    if not isinstance(data, list):
        raise UserError(Problem(str(path), "expected a list of cases (or a mapping with 'cases')"))
    out: list[RawCase] = []
    for i, item in enumerate(data):
        line = node.value[i].start_mark.line + 1 if isinstance(node, yaml.SequenceNode) else None
        if not isinstance(item, dict):
            raise UserError(Problem(str(path), "each case must be a mapping", path=f"[{i}]", line=line))
        out.append((item, f"{path}:{line}" if line else f"{path}[{i}]"))
    return out


def loader_for(fmt: str) -> Loader:
    """The loader of dataset format ``fmt``: a built-in, or a ``mst.datasets`` plugin."""
    try:
        loaded: Loader = load(DATASETS, fmt)
    except UnknownPlugin as exc:
        raise UserError(str(exc)) from None
    return loaded


def load_dataset(path: Path | None, fmt: str | None, options: dict[str, Any]) -> Iterator[RawCase]:
    """The cases of one dataset, one at a time; a :class:`UserError` may come while iterating."""
    if fmt is None:
        assert path is not None
        fmt = path.suffix.lstrip(".").lower()
        if fmt == "json":
            fmt = "jsonl"
    for item in loader_for(fmt)(path, options):
        yield item if isinstance(item, tuple) else (item, f"{path or fmt}")
