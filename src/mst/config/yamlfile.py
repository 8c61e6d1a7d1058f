"""YAML parsed once, with the C parser when it is installed, and bounded before objects are built
(docs/eval-file.md says what is refused and why).

An eval file (and a YAML dataset) is parsed in one pass: events from libyaml (PyYAML's pure-Python
parser when libyaml is absent) are composed here into a node tree that keeps every node's line,
and the tree is then constructed into Python data. Composing here, rather than with PyYAML's own
composer, is what bounds the input before anything large is built:

- nesting deeper than :data:`MAX_DEPTH` (through aliases too) is refused, so nothing downstream
  (construction, validation, JSON encoding of a case's ``expected``) ever recurses too deeply;
- aliases that would expand to more than :data:`MAX_ALIAS_NODES` nodes in all (an alias bomb:
  nine levels of nine aliases is 387 million nodes) are refused while composing, so no object is
  built for them;
- an alias to the node that contains it (``&a [*a]``) is refused: an anchor is known only once
  its node is complete, so the data is never cyclic.

Constructing then checks what YAML's tags produce: a bad explicit tag (``!!int abc``,
``!!timestamp 1``) is an error at its line, and :func:`data_problems` refuses values mst could not
store in a run (numbers beyond 64 bits, ``!!binary``, ``!!set``, keys that are not strings). The
garbage collector is paused meanwhile (:func:`gc_paused_for`): the pass allocates many small
acyclic nodes and each automatic collection would sweep the whole growing tree (it made a
20,000-case file five times slower).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from mst._gc import paused_gc
from mst.config.errors import Problem, UserError
from mst.config.files import decode_utf8

MAX_DEPTH = 100  # nesting levels: far beyond any eval, well below every recursion limit downstream
MAX_ALIAS_NODES = 100_000  # nodes that all aliases of one file may expand to
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # what every run file (JSON) and every reader of it can hold
_MAX_DATA_PROBLEMS = 20

_ConstructorError = yaml.constructor.ConstructorError


class _TagErrors:
    """Construction errors all carry the line of the node they concern: PyYAML lets a bad
    ``!!int``, ``!!bool`` or ``!!timestamp`` value escape as a ValueError, KeyError or
    AttributeError naming nothing."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            tag = str(node.tag).rpartition(":")[2]
            value = node.value if isinstance(node, yaml.ScalarNode) else "a collection"
            text = str(exc)
            reason = f" ({text if len(text) <= 80 else text[:79] + '…'})" if isinstance(exc, ValueError) else ""
            raise _ConstructorError(
                None, None, f"not a valid !!{tag} value: {_short(value)}{reason}", node.start_mark
            ) from None


class PyLoader(_TagErrors, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader: the fallback, about ten times slower."""


try:
    from yaml import CSafeLoader

    class CLoader(_TagErrors, CSafeLoader):
        """The safe loader on libyaml's parser."""

    _Loader: type[Any] = CLoader
except ImportError:  # PyYAML built without libyaml
    _Loader = PyLoader


def parse_yaml(raw: bytes, file: str, loader_class: type[Any] | None = None) -> tuple[Any, yaml.Node | None]:
    """The data and node tree of one YAML document; any problem is a :class:`UserError` naming
    ``file`` and, where known, the line. ``loader_class`` (tests) picks PyLoader or CLoader."""
    text = decode_utf8(raw, file)
    loader = (loader_class or _Loader)(text)
    try:
        with gc_paused_for(raw):
            node = _compose(loader, file)
            data = loader.construct_document(node) if node is not None else None
            ok = storable(data)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise UserError(Problem(file, f"character #x{exc.character:04x} is not allowed in YAML "
                                      "(a control character?)", line=line)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "unreadable"
        if not isinstance(exc, _ConstructorError):  # a value's error says what is wrong already
            problem = f"malformed YAML: {problem}"
        raise UserError(Problem(file, problem, line=mark.line + 1 if mark is not None else None)) from None
    except yaml.YAMLError as exc:
        raise UserError(Problem(file, f"malformed YAML: {exc}")) from None
    except RecursionError:  # a last resort: composing bounds the depth already
        raise UserError(Problem(file, f"nested too deeply (more than {MAX_DEPTH} levels)")) from None
    finally:
        loader.dispose()
    if ok:
        return data, node
    problems = [Problem(file, message, path, _line_of(node, keys)) for keys, path, message in data_problems(data)]
    raise UserError(problems)


def gc_paused_for(raw: bytes) -> AbstractContextManager[None]:
    """The garbage collector paused for a pass over the nodes or data of a YAML file (a small
    file is left alone; see :func:`mst._gc.paused_gc`)."""
    return paused_gc(len(raw) // _BYTES_PER_NODE)


_BYTES_PER_NODE = 8  # roughly, in an eval file; paused_gc counts the objects a pass builds


# --- composing ---------------------------------------------------------------------------------

_Frame = list[Any]  # [node, anchor, expanded size, height, flat values]


def _compose(loader: Any, file: str) -> yaml.Node | None:
    """One document's node tree from the event stream, bounded as the module says."""
    get = loader.get_event
    get()  # StreamStartEvent
    if isinstance(loader.peek_event(), StreamEndEvent):
        return None
    get()  # DocumentStartEvent
    root = _compose_node(loader, file)
    get()  # DocumentEndEvent
    if not isinstance(loader.peek_event(), StreamEndEvent):
        extra = loader.peek_event()
        raise UserError(Problem(file, "expected one YAML document, found another ('---')",
                                line=extra.start_mark.line + 1))
    return root


def _compose_node(loader: Any, file: str) -> yaml.Node:
    get, resolve = loader.get_event, loader.resolve
    anchors: dict[str, tuple[yaml.Node, int, int]] = {}  # anchor -> (node, expanded size, height)
    stack: list[_Frame] = []
    aliased = 0
    while True:
        event = get()
        cls = event.__class__
        if cls is ScalarEvent:
            tag = event.tag if event.tag not in (None, "!") else resolve(yaml.ScalarNode, event.value, event.implicit)
            node: yaml.Node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
            size, height = 1, 0
            if event.anchor is not None:
                anchors[event.anchor] = (node, 1, 0)
        elif cls is SequenceStartEvent or cls is MappingStartEvent:
            kind = yaml.SequenceNode if cls is SequenceStartEvent else yaml.MappingNode
            tag = event.tag if event.tag not in (None, "!") else resolve(kind, None, event.implicit)
            if len(stack) >= MAX_DEPTH:
                raise _too_deep(file, event)
            stack.append([kind(tag, [], event.start_mark, None, flow_style=event.flow_style),
                          event.anchor, 1, 0, []])
            continue
        elif cls is SequenceEndEvent or cls is MappingEndEvent:
            node, anchor, size, height, values = stack.pop()
            node.end_mark = event.end_mark
            node.value = values if cls is SequenceEndEvent else list(zip(values[0::2], values[1::2], strict=True))
            if anchor is not None:
                anchors[anchor] = (node, size, height)
        elif cls is AliasEvent:
            if event.anchor not in anchors:
                raise UserError(Problem(file, f"alias *{event.anchor} is not defined before this point "
                                              "(or refers to the node that contains it)",
                                        line=event.start_mark.line + 1))
            node, size, height = anchors[event.anchor]
            aliased += size
            if aliased > MAX_ALIAS_NODES:
                raise UserError(Problem(file, f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes "
                                              "(a YAML alias bomb?); refused", line=event.start_mark.line + 1))
            if len(stack) + height > MAX_DEPTH:
                raise _too_deep(file, event)
        else:  # not reachable from a well-formed stream: the parser raises first
            raise UserError(Problem(file, f"malformed YAML: unexpected {cls.__name__}",
                                    line=event.start_mark.line + 1))
        if not stack:
            return node
        parent = stack[-1]
        parent[2] += size
        parent[3] = max(parent[3], height + 1)
        parent[4].append(node)


def _too_deep(file: str, event: Any) -> UserError:
    return UserError(Problem(file, f"nested too deeply (more than {MAX_DEPTH} levels)",
                             line=event.start_mark.line + 1))


# --- what a run can store ----------------------------------------------------------------------

_SCALARS = (str, bool, float, type(None), datetime.date)


def storable(data: Any) -> bool:
    """Whether :func:`data_problems` has nothing to say, decided without building field paths
    (this runs over every value of a 20,000-case file)."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if value.__class__ is dict:
            if any(k.__class__ is not str for k in value):
                return False
            children: Iterable[Any] = value.values()
        elif value.__class__ is list or value.__class__ is tuple:  # tuples: !!omap, !!pairs
            children = value
        else:
            if _value_problem(value, depth) is not None:
                return False
            continue
        if depth >= MAX_DEPTH:
            return False
        if id(value) in seen:
            continue
        seen.add(id(value))
        for v in children:
            c = v.__class__
            if c is str or c is float or c is bool or v is None:
                continue
            if c is int:
                if not INT_MIN <= v <= INT_MAX:
                    return False
                continue
            stack.append((v, depth + 1))
    return True


def data_problems(data: Any) -> Iterator[tuple[list[int | str], str, str]]:
    """Values mst could not store in a run's JSON files, as (keys, field path, message).

    Iterative (the data may be deep) and linear: a container shared through aliases is walked
    once. Integers must fit in 64 bits (a larger ``seed`` or ``expected`` would fail every attempt
    when it is written); mapping keys must be strings; ``!!binary`` and ``!!set`` have no JSON form.
    """
    seen: set[int] = set()
    stack: list[tuple[Any, list[int | str], int]] = [(data, [], 0)]
    found = 0
    while stack and found < _MAX_DATA_PROBLEMS:
        value, keys, depth = stack.pop()
        message = _value_problem(value, depth)
        if message is not None:
            found += 1
            yield keys, _path(keys), message
            continue
        if isinstance(value, (dict, list, tuple)) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in reversed(list(items)):
                if isinstance(value, dict) and not isinstance(k, str):
                    found += 1
                    yield keys, _path(keys), f"mapping key {_short(k)} is not a string (quote it)"
                    continue
                stack.append((v, [*keys, k], depth + 1))


def _value_problem(value: Any, depth: int) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT_MIN <= value <= INT_MAX:
            return "integer out of range: numbers must fit in 64 bits (-2^63 to 2^63-1); quote it to keep it as text"
        return None
    if isinstance(value, _SCALARS):
        return None
    if isinstance(value, (dict, list, tuple)):
        return f"nested too deeply (more than {MAX_DEPTH} levels)" if depth >= MAX_DEPTH else None
    if isinstance(value, (bytes, bytearray)):
        return "binary values (!!binary) are not supported: give text"
    if isinstance(value, (set, frozenset)):
        return "sets (!!set) are not supported: give a list"
    return f"a value of type {type(value).__name__} is not supported"


def _path(keys: list[int | str]) -> str:
    more = f"…(+{len(keys) - 10} levels)" if len(keys) > 12 else ""
    shown = keys[:10] if more else keys
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in shown).lstrip(".") + more


def _line_of(node: yaml.Node | None, keys: list[int | str]) -> int | None:
    for n in range(len(keys), -1, -1):
        found = subnode(node, keys[:n])
        if found is not None:
            return int(found.start_mark.line) + 1
    return None


# --- node lookups ------------------------------------------------------------------------------


def subnode(node: yaml.Node | None, keys: Sequence[int | str]) -> yaml.Node | None:
    """The node at a path of mapping keys and sequence indexes, or None where it is absent."""
    for key in keys:
        node = child(node, key) if isinstance(key, int) else mapping_child(node, key)[1]
    return node


def child(node: yaml.Node | None, index: int) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and 0 <= index < len(node.value):
        found: yaml.Node = node.value[index]
        return found
    return None


def mapping_child(node: yaml.Node | None, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    """The key and value nodes of ``key`` in a mapping node (the last, as the data keeps it)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in reversed(node.value):
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None, None


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
