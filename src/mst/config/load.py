"""Eval file → :class:`EvalConfig`, with every error naming the file, field path and line."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from mst.config.errors import Problem, UserError
from mst.config.files import read_file
from mst.config.models import EvalConfig
from mst.config.yamlfile import child, gc_paused_for, mapping_child, parse_yaml

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None, bytes]:
    """Read and parse a YAML file once (see :mod:`mst.config.yamlfile`), keeping the node tree so
    errors can point at lines."""
    raw = read_file(path)
    data, node = parse_yaml(raw, str(path))
    return data, node, raw


@dataclass(frozen=True)
class EvalFile:
    """A validated eval file, with the parsed data and node tree kept so later checks (client
    settings, validated by each client kind) can point at lines without reading the file again."""

    config: EvalConfig
    digest: str  # sha256 of the file's bytes
    data: dict[str, Any]
    node: yaml.Node | None


def load_eval(path: Path) -> EvalFile:
    """Read, parse and validate an eval file once."""
    data, node, raw = read_yaml(path)
    if not isinstance(data, dict):
        raise UserError(Problem(str(path), "expected a mapping at the top level (name, cases, variants, ...)"))
    with gc_paused_for(raw):  # the node tree is large and live: see mst.config.yamlfile
        config = validate(EvalConfig, data, str(path), node)
    return EvalFile(config, hashlib.sha256(raw).hexdigest(), data, node)


def validate(
    model: type[M], data: Any, file: str, node: yaml.Node | None = None, prefix: str = ""
) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(problems_from(exc, data, file, node, prefix)) from None


def problems_from(
    exc: ValidationError, data: Any, file: str, node: yaml.Node | None = None, prefix: str = ""
) -> list[Problem]:
    problems = []
    index = _KeyIndex()
    for err in exc.errors(include_input=False, include_url=False):
        path, line = locate(err["loc"], data, node, index)
        path = f"{prefix}.{path}" if prefix and path else (prefix or path)
        problems.append(Problem(file, _message(err), path, line))
    return problems


def _message(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def locate(
    loc: Sequence[int | str], data: Any, node: yaml.Node | None, index: _KeyIndex | None = None
) -> tuple[str, int | None]:
    """Render a pydantic error location as a field path over the real data, with its YAML line.

    Union and discriminator members (e.g. ``contains`` in ``assertions.0.contains.value``) appear
    in pydantic's location but not in the data; they are skipped so the path names real fields.
    ``index`` caches each mapping's keys: a file with 20,000 unknown fields has 20,000 errors,
    and scanning the mapping for each one made locating them quadratic.
    """
    index = _KeyIndex() if index is None else index
    parts: list[str] = []
    line = _line(node)
    for i, key in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            parts.append(f"[{key}]")
            data = data[key]
            node = child(node, key)
        elif isinstance(data, dict) and key in data:
            parts.append(f".{key}")
            data = data[key]
            key_node, node = index.lookup(node, str(key))
            line = _line(key_node) or line
            continue
        elif isinstance(data, dict) and last:
            parts.append(f".{key}")  # a missing or unknown field: point at its mapping
            break
        else:
            continue
        line = _line(node) or line
    return "".join(parts).lstrip("."), line


class _KeyIndex:
    """Mapping nodes' keys by name, built once per mapping node that errors point into."""

    def __init__(self) -> None:
        self._by_node: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}

    def lookup(self, node: yaml.Node | None, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
        if not isinstance(node, yaml.MappingNode):
            return None, None
        keys = self._by_node.get(id(node))
        if keys is None:
            if len(node.value) < 8:
                return mapping_child(node, key)
            keys = {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            self._by_node[id(node)] = keys
        return keys.get(key, (None, None))


def _line(node: yaml.Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None
