"""run.json's head, typed: the run's identity, its eval, its phases, where it ran, what graded it.

:class:`RunMeta` is immutable: a phase that changes the run makes a new one
(``run.meta = run.meta.with_phases(grade="complete")``), so no reader can change the metadata
behind the writer's back. It keeps the head it was read from as it was — every field, in its
order, those this version does not name included — so run.json is written back unchanged but for
what changed (docs/grading.md). The typed views (:class:`Phases`, :class:`EvalRef`,
:class:`GradingMeta`) are what readers use.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, cast

import orjson

from mst import fileio

PhaseState = Literal["complete", "partial", "skipped", "pending"]


@dataclass(frozen=True, slots=True)
class Phases:
    collect: PhaseState
    grade: PhaseState

    def to_json(self) -> dict[str, Any]:
        return {"collect": self.collect, "grade": self.grade}


@dataclass(frozen=True, slots=True)
class EvalRef:
    """The eval the run was collected with (``collectedDigest``: a regrade's source eval)."""

    name: str
    path: str
    digest: str
    collected_digest: str | None = None


@dataclass(frozen=True, slots=True)
class GradingMeta:
    """What a run's grading was done with: ``--resume`` refuses when this set changed."""

    runner: Mapping[str, Any]
    source: str
    judges: Mapping[str, list[str]]
    pairwise: str | None
    graders: tuple[str, ...]

    def to_json(self, *, judges: bool = True) -> dict[str, Any]:
        """As run.json's ``grading`` holds it (without ``judges`` when ``judges`` is false)."""
        out: dict[str, Any] = {"runner": dict(self.runner), "source": self.source}
        if judges:
            out["judges"] = {k: list(v) for k, v in self.judges.items()}
        return {**out, "pairwise": self.pairwise, "graders": list(self.graders)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradingMeta:
        return cls._of(data, {k: list(v) for k, v in (data.get("judges") or {}).items()})

    @classmethod
    def _of(cls, data: Mapping[str, Any], judges: dict[str, list[str]]) -> GradingMeta:
        return cls(MappingProxyType(dict(data.get("runner") or {"name": "local"})), str(data.get("source", "live")),
                   MappingProxyType(judges), data.get("pairwise"), tuple(data.get("graders") or ()))

    @classmethod
    def _of_decoded(cls, data: dict[str, Any]) -> GradingMeta:
        """From run.json's ``grading`` just decoded (no one else holds it): its per-case judge
        lists kept, not copied, equal ones made one (most cases have the same judges). `mst run`
        reads it before grading to check the judges, and a copy per case was that step's peak."""
        judges: dict[str, list[str]] = data.get("judges") or {}
        alike: dict[tuple[str, ...], list[str]] = {}
        for case, names in judges.items():
            judges[case] = alike.setdefault(tuple(names), names)
        return cls._of(data, judges)


def _copy(data: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of JSON data (a run of 10,000 cases has a long ``cases`` list: orjson copies
    it in microseconds, where ``copy.deepcopy`` takes tens of milliseconds)."""
    copied: dict[str, Any] = orjson.loads(orjson.dumps(dict(data)))
    return copied


# run.json's parts with an entry per case (the cases, and each case's judges in ``grading``): a
# run of 100,000 cases keeps them as their JSON bytes, a tenth of what the decoded lists and
# dicts cost, and decodes them when they are read (rarely: resume checks and regrades).
_PACKED: Final = frozenset({"cases", "grading"})


def _packed_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with its per-case parts packed: those are encoded straight from the
    caller's values (their bytes are the copy), the rest copied as JSON. Packing a copy made
    first held three forms of 100,000 cases at once, the peak of `mst run` before it collects
    and again before it grades (issue 16)."""
    small = _copy({k: v for k, v in data.items() if k not in _PACKED})
    return {k: _Packed(v) if k in _PACKED else small[k] for k, v in data.items()}


class _Packed:
    """A JSON value kept as its bytes (see ``_PACKED``), as run.json has it: indented and sorted
    as :func:`mst.fileio.json_file_bytes` writes a value one level down, so writing run.json
    puts the bytes in as they are (:meth:`RunMeta.file_head`), never decoding 100,000 cases
    to encode them again. JSON strings hold no raw line break, so indenting the lines is exact.

    The bytes are held deflated (zlib, its fastest level): a case's entry repeats its
    neighbours' keys and layout, so ~80 bytes a case shrink to ~10, held from before collection
    to the end of the run (issue 16, bench/perf16_memory.md). They are inflated a block at a
    time when written or read, never held whole but by :meth:`value`."""

    __slots__ = ("_deflated", "_size")

    def __init__(self, value: Any) -> None:
        sink = _Deflating()
        _indented(value, 1, sink.out, sink.spill)
        self._deflated, self._size = sink.finish()

    @property
    def raw(self) -> bytes:
        """The whole bytes, inflated (for a caller that needs them at once: tests, small parts)."""
        return zlib.decompress(self._deflated, bufsize=max(self._size, 1))

    def chunks(self) -> Iterator[bytes]:
        """The bytes, an :data:`mst.fileio.IO_BLOCK` at a time (what run.json is written from)."""
        return _inflated(self._deflated, fileio.IO_BLOCK)

    def value(self) -> Any:
        return orjson.loads(self.raw)

    def elements(self) -> Iterator[Any]:
        """The list's elements, decoded about :data:`_DECODE_BLOCK` bytes at a time: reading
        100,000 cases' ids does not hold 100,000 decoded cases at once (a kilobyte each). Not
        :data:`mst.fileio.IO_BLOCK`: a mebibyte of cases decoded is ~18,000 of them, ~18 MB at
        once, where the bytes were a mebibyte (issue 16, bench/perf16_memory.md).

        An element of the list starts a line indented by exactly :data:`_ELEMENT` (its own
        lines, nested deeper, have more spaces, and a JSON string holds no raw line break), so
        a comma that ends a line followed by that indent and a non-space ends an element."""
        blocks = _inflated(self._deflated, min(fileio.IO_BLOCK, _DECODE_BLOCK))
        pending = bytearray(next(blocks, b""))
        if not pending.startswith(b"[") or self._size == 2:  # not a list, or []
            yield from self.value()
            return
        del pending[:1]
        for block in blocks:
            searched = max(len(pending) - len(_ELEMENT) - 1, 0)
            pending += block
            cut = _last_element_end(pending, searched)
            if cut >= 0:
                yield from _decoded_list(pending, cut)
                del pending[:cut + 1]  # and the comma
        yield from _decoded_list(pending, len(pending) - len(_LIST_END))


class _Deflating:
    """Where :func:`_indented` writes a packed part: its output deflated a block at a time, so
    the whole text is never held (a run of 100,000 cases: ~8 MB of it)."""

    __slots__ = ("_done", "_zlib", "out", "size")

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(1)
        self._done: list[bytes] = []
        self.out = bytearray()
        self.size = 0

    def spill(self) -> None:
        """Deflate what was written, once it is a block."""
        if len(self.out) >= _DEFLATE_BLOCK:
            self._take()

    def _take(self) -> None:
        self.size += len(self.out)
        self._done.append(self._zlib.compress(self.out))
        self.out.clear()

    def finish(self) -> tuple[bytes, int]:
        """The deflated bytes and the length of what they inflate to."""
        self._take()
        self._done.append(self._zlib.flush())
        return b"".join(self._done), self.size


def _inflated(deflated: bytes, block: int) -> Iterator[bytes]:
    """``deflated`` inflated, at most ``block`` bytes at a time."""
    inflating = zlib.decompressobj()
    data = deflated
    while not inflating.eof:
        out = inflating.decompress(data, block)
        data = inflating.unconsumed_tail
        if out:
            yield out
        elif not data:
            raise ValueError("a packed part's bytes end early")


def _decoded_list(text: bytearray, end: int) -> Any:
    """The elements of a list whose elements, comma-separated, are ``text[:end]``."""
    batch = bytearray(b"[")
    with memoryview(text) as view:
        batch += view[:end]
    batch += b"]"
    return orjson.loads(batch)


_DECODE_BLOCK: Final = 8 * 1024  # bytes of a packed list decoded at once: ~140 cases
_DEFLATE_BLOCK: Final = 64 * 1024  # bytes of a packed part's text deflated at once
_INDENT: Final = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
_WHOLE: Final = 64  # a list or dict of at most this many scalars is encoded by one orjson call
_BATCH: Final = 256  # flat entries of a long list or dict encoded by one orjson call


def _indented(value: Any, level: int, out: bytearray, spill: Callable[[], None]) -> None:
    """Append ``value`` as ``orjson.dumps(value, option=_INDENT)`` writes it, every line after
    the first indented by ``level`` more steps of two spaces (a value ``level`` deep in a file).

    A long list or dict is written an entry at a time: orjson's peak is ~15 times its output
    for a dict of 100,000 short entries (it sorts them and grows its buffer), and its output
    keeps that buffer. The layout is orjson's (and ``json.dumps(indent=2)``'s): an entry a
    line, ``": "`` after a key, keys in code point order, ``[]`` and ``{}`` when empty.
    ``spill`` is called after each entry (to take what ``out`` holds: :class:`_Deflating`).
    An iterator is written as the list of its entries."""
    if not isinstance(value, Iterator) and _flat(value):
        out += orjson.dumps(value, option=_INDENT).replace(b"\n", b"\n" + b"  " * level)
        return
    keyed = isinstance(value, Mapping)
    entries = _in_key_order(value) if keyed else ((None, item) for item in value)
    out += b"{" if keyed else b"["
    first = _entries(entries, keyed, level, out, spill)
    close = b"}" if keyed else b"]"
    out += close if first else b"\n" + b"  " * level + close


def _entries(entries: Iterable[tuple[str | None, Any]], keyed: bool, level: int, out: bytearray,
             spill: Callable[[], None]) -> bool:
    """Append a list's or dict's entries (``keyed``: a dict's, as (key, value)) as
    :func:`_indented` writes them: runs of flat entries by one orjson call (:func:`_flat_batch`),
    others an entry at a time, ``spill`` called after each. Whether nothing was written."""
    inner = b"\n" + b"  " * (level + 1)
    by_key: dict[str, Any] = {}
    in_order: list[Any] = []
    batch: dict[str, Any] | list[Any] = by_key if keyed else in_order
    first = True
    for key, item in entries:
        if _flat(item):
            if keyed:
                by_key[cast(str, key)] = item
            else:
                in_order.append(item)
            if len(batch) < _BATCH:
                continue
            first = _flat_batch(batch, level, out, first)
        else:
            first = _flat_batch(batch, level, out, first)
            out += inner if first else b"," + inner
            if keyed:
                out += orjson.dumps(key) + b": "
            _indented(item, level + 1, out, spill)
            first = False
        batch.clear()
        spill()
    return _flat_batch(batch, level, out, first)


def _flat_batch(batch: list[Any] | dict[str, Any], level: int, out: bytearray, first: bool) -> bool:
    """Append consecutive flat entries of a list or dict (``batch``, in order) as :func:`_indented`
    writes each, by one orjson call: its text of them, brackets cut off, is those entries' lines
    (an entry at a time cost ~10 k instructions each). Whether nothing was written yet."""
    if not batch:
        return first
    text = orjson.dumps(batch, option=_INDENT)  # [\n  entry,\n  entry\n]
    out += (b"" if first else b",") + text[1:-2].replace(b"\n", b"\n" + b"  " * level)
    return False


def _in_key_order(value: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """``value``'s items by key. As they come when they already are in that order (a run's case
    ids mostly are): the judges of 100,000 cases (:class:`mst.grading.context.JudgeSets`, no
    dict) are then written with no dict of them and no list of their ids sorted (issue 16)."""
    previous: str | None = None
    for key in value:
        if previous is not None and key <= previous:
            held = value if isinstance(value, dict) else dict(value.items())
            return ((k, held[k]) for k in sorted(held))
        previous = key
    return value.items()


def _flat(value: Any) -> bool:
    """A scalar, or a short list or dict of scalars: one orjson call encodes it. Not a mapping
    of another type (orjson encodes dicts only): that is written an entry at a time, as is a
    list or dict holding one, or a scalar of a type but JSON's (the same bytes either way)."""
    if type(value) in _SCALARS:
        return True
    if isinstance(value, list | tuple | dict):
        return len(value) <= _WHOLE and all(type(v) in _SCALARS
                                            for v in (value.values() if isinstance(value, dict) else value))
    return not isinstance(value, Mapping)


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_ELEMENT: Final = b",\n    "  # what separates two elements of a packed list (a top-level key's value)
_LIST_END: Final = b"\n  ]"


def _last_element_end(text: bytearray, start: int) -> int:
    """Where the last element of a packed list's text that ends at or after ``start`` ends
    (-1: none does yet). A separator counts once the byte after it is there."""
    end = len(text) - 1
    while (cut := text.rfind(_ELEMENT, start, end)) >= 0:
        if text[cut + len(_ELEMENT)] != 0x20:  # a space: a separator nested deeper
            return cut
        end = cut + len(_ELEMENT) - 1
    return -1


def _unpacked(value: Any) -> Any:
    return value.value() if isinstance(value, _Packed) else value


class RunMeta:
    """run.json without its attempts. Read by the properties; changed only by making a new one."""

    __slots__ = ("_data", "_grading")
    _data: dict[str, Any]
    _grading: GradingMeta | None  # what ``grading`` was packed from, in this process (see with_grading)

    def __init__(self, data: Mapping[str, Any]) -> None:
        """``data`` as run.json holds it; a per-case part (``_PACKED``) may be an iterator of its
        list's entries, packed as they come: `mst run`'s first head never holds a dict per case
        (100,000 of them were ~18 MB at once; issue 16)."""
        object.__setattr__(self, "_data", _packed_copy(data))
        object.__setattr__(self, "_grading", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"RunMeta is immutable; make a new one (with_phases, with_grading, ...), not {name}")

    # -- the codec -----------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunMeta:
        return cls(data)

    def to_json(self) -> dict[str, Any]:
        """A copy of the head, in the order it was read (new fields after the old)."""
        return {k: v.value() if isinstance(v, _Packed) else _copy({k: v})[k] for k, v in self._data.items()}

    def file_head(self) -> tuple[dict[str, Any], dict[str, Iterator[bytes]]]:
        """The head as run.json is written from (:func:`mst.runs.record_files.write_record_file`):
        its small fields, and the per-case parts as their kept bytes (streamed into the file, not
        decoded, not joined into one document). Only for writing."""
        small = {k: v for k, v in self._data.items() if not isinstance(v, _Packed)}
        return small, {k: v.chunks() for k, v in self._data.items() if isinstance(v, _Packed)}

    def _with(self, grading_meta: GradingMeta | None = None, **fields: Any) -> RunMeta:
        # Shallow: the values kept are never handed out uncopied, so they are never changed.
        data = dict(self._data)
        data.update(_packed_copy(fields))
        made = RunMeta.__new__(RunMeta)
        object.__setattr__(made, "_data", data)
        object.__setattr__(made, "_grading", grading_meta if "grading" in fields else self._grading)
        return made

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunMeta) and other.to_json() == self.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunMeta(id={self.id!r})"

    # -- reading -------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return str(self._data["id"])

    @property
    def eval(self) -> EvalRef:
        e = self._data["eval"]
        return EvalRef(str(e.get("name", "")), str(e.get("path", "")), str(e.get("digest", "")),
                       e.get("collectedDigest"))

    def head(self, name: str) -> Any:
        """A copy of one field of the head as read (``None`` when absent), without decoding the
        per-case parts the other fields keep packed (:meth:`to_json` decodes them all)."""
        value = _unpacked(self._data.get(name))
        return value if isinstance(self._data.get(name), _Packed) else _copy({name: value})[name]

    @property
    def phases(self) -> Phases:
        p = self._data["phases"]
        return Phases(cast(PhaseState, p.get("collect", "pending")), cast(PhaseState, p.get("grade", "pending")))

    @property
    def case_ids(self) -> set[str]:
        """Decoded a block of cases at a time (see :meth:`_Packed.elements`): `mst run` checks
        them before grading, and the whole list decoded was its peak of memory."""
        return set(self.iter_case_ids())

    def iter_case_ids(self) -> Iterator[str]:
        """The case ids in run.json's order, decoded a block of cases at a time: for a check that
        needs no set of them (a set is ~60 bytes an id; issue 16). Not interned: that would grow
        the interpreter's dict of interned strings by a case each, for good (see CaseTable.add)."""
        cases = self._data["cases"]
        return (str(c["id"]) for c in (cases.elements() if isinstance(cases, _Packed) else cases))

    @property
    def cases(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(MappingProxyType(dict(c)) for c in _unpacked(self._data["cases"]))

    @property
    def variants(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(MappingProxyType(dict(v)) for v in self._data["variants"])

    @property
    def runner(self) -> Mapping[str, Any]:
        return MappingProxyType(_copy(self._data.get("runner") or {"name": "local"}))

    @property
    def no_grade(self) -> bool:
        return bool(self._data.get("noGrade"))

    @property
    def regrade_of(self) -> str | None:
        value = self._data.get("regradeOf")
        return None if value is None else str(value)

    @property
    def grading(self) -> GradingMeta | None:
        """Decoded from the packed bytes, unless this meta packed them from a GradingMeta
        itself (:meth:`with_grading`): `mst run` checks the judges right after recording them,
        and decoding every case's judges again was that step's peak (issue 16)."""
        if self._grading is not None:
            return self._grading
        value = _unpacked(self._data.get("grading"))
        return GradingMeta._of_decoded(value) if value else None

    # -- a changed copy ------------------------------------------------------------------------

    def with_phases(self, *, collect: PhaseState | None = None, grade: PhaseState | None = None) -> RunMeta:
        phases = dict(self._data["phases"])
        if collect is not None:
            phases["collect"] = collect
        if grade is not None:
            phases["grade"] = grade
        return self._with(phases=phases)

    def with_grading(self, grading: GradingMeta) -> RunMeta:
        # Packed from the judges' own lists, as they are (see _in_key_order): to_json's copy of
        # every case's list, or a dict of them, would be made and dropped at once.
        return self._with(grading, grading={**grading.to_json(judges=False), "judges": grading.judges})

    def with_grading_runner(self, runner: Mapping[str, Any]) -> RunMeta:
        grading = dict(_unpacked(self._data.get("grading")) or {})
        grading["runner"] = dict(runner)
        return self._with(grading=grading)

    def with_runner(self, runner: Mapping[str, Any]) -> RunMeta:
        return self._with(runner=dict(runner))

    def updated(self, when: str) -> RunMeta:
        return self._with(updatedAt=when)


__all__ = ["EvalRef", "GradingMeta", "PhaseState", "Phases", "RunMeta"]
