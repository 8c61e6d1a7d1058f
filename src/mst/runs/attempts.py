"""An attempt's record, typed: what a run holds for each (variant, case, trial).

The producer (the collector, a collect shard) writes the record as JSON to ``attempts.jsonl``;
a run keeps those bytes as they are and decodes a record, when read, into an immutable
:class:`AttemptRecord` — one codec (:meth:`AttemptRecord.from_json` / :meth:`to_json`), the way
:mod:`mst.endings` keeps its closed set. Fields a newer or older mst wrote that this one does not
name are kept and written back in place, so nothing read is lost.

A run reads every attempt several times (to grade it, to compare it, to summarize it), and most
reads need two or three fields. So the record keeps the object it was decoded from, privately,
and its typed fields read from it; the ending, the one field that takes work to decode, is
decoded on first use and kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from mst import endings
from mst.runs.frozen import JsonView, freeze

_COMPLETED: Final = endings.to_json(endings.COMPLETED)  # most attempts: decoded without building one
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_UNSET: Final = object()
_NUMBER: Final = (int, float)  # made once: ``int | float`` in an isinstance builds a union per call


class AttemptRecord(JsonView):
    """One attempt: its key, its ending (decided once, by its producer) and where its files are.

    Read it by attribute. It also reads as the (read-only) JSON object it is stored as —
    ``record["ending"]`` — for code that speaks the file format. Nothing about it can be changed:
    make a new record instead.
    """

    __slots__ = ("_data", "_ending")
    _data: dict[str, Any]
    _ending: Any

    def __init__(self, data: Mapping[str, Any]) -> None:
        """``data`` is the record's JSON object; it must not be changed after (the codec's
        callers hand over a freshly decoded one)."""
        _SET_DATA(self, data if type(data) is dict else dict(data))
        _SET_ENDING(self, _UNSET)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"an AttemptRecord is immutable (cannot set {name!r}); make a new one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"an AttemptRecord is immutable (cannot delete {name!r})")

    # -- the codec -----------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptRecord:
        """Decode a stored record; raises ``KeyError``/``TypeError``/``ValueError`` on one whose
        key is missing or malformed. Its ending is checked where a run stores the record (see
        :func:`ending_of`); one written before endings existed is mapped (:func:`endings.from_record`)."""
        if data["variant"].__class__ is not str or data["case"].__class__ is not str:
            raise TypeError("an attempt's variant and case must be strings")
        if data["trial"].__class__ is not int:
            raise TypeError("an attempt's trial must be an integer")
        return cls(data)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON object (a copy), fields in their stored order."""
        data = dict(self._data)
        if "ending" not in data:  # written before endings existed: the ending it maps to, stamped
            ending = self.ending
            data["ending"] = endings.to_json(ending)
            data["infrastructureError"] = endings.infrastructure_error(ending)
        return data

    # -- fields --------------------------------------------------------------------------------

    @property
    def variant(self) -> str:
        return str(self._data["variant"])

    @property
    def case(self) -> str:
        return str(self._data["case"])

    @property
    def trial(self) -> int:
        return int(self._data["trial"])

    @property
    def key(self) -> tuple[str, str, int]:
        d = self._data
        return (d["variant"], d["case"], d["trial"])

    @property
    def try_number(self) -> int:
        return int(self._data.get("try") or 1)

    @property
    def ending(self) -> endings.Ending:
        ending = self._ending
        if ending is _UNSET:
            stored = self._data.get("ending")
            ending = endings.COMPLETED if stored == _COMPLETED else endings.from_record(self._data)
            _SET_ENDING(self, ending)
        return ending  # type: ignore[no-any-return]

    @property
    def ending_json(self) -> Mapping[str, Any]:
        """The ending as stored (read-only): what a trial's view shows its judges."""
        stored = self._data.get("ending")
        return MappingProxyType(stored) if stored.__class__ is dict else freeze(endings.to_json(self.ending))

    @property
    def answer(self) -> str | None:
        answer = self._data.get("answer")
        return None if answer is None else str(answer)

    @property
    def transcript(self) -> str | None:
        """The transcript file, relative to the run directory."""
        return self._data.get("transcript")

    @property
    def artifacts(self) -> str | None:
        return self._data.get("artifacts")

    @property
    def duration_ms(self) -> float | None:
        return duration_of(self._data)

    @property
    def usage(self) -> Mapping[str, Any]:
        return usage_of(self._data)

    @property
    def diagnostics(self) -> Mapping[str, Any] | None:
        value = self._data.get("diagnostics")
        return freeze(value) if isinstance(value, dict) else None  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttemptRecord) and other.to_json() == self.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AttemptRecord({self.variant}/{self.case}/{self.trial}, {endings.describe(self.ending)})"


# The slots' own setters: what ``object.__setattr__`` (the class refuses plain stores) reaches
# after looking each name up; called directly, a record is made for ~2.8 k instructions, not
# ~4.6 k (a run makes two per attempt: collected, then graded; bench/perf16_collect.md).
_SET_DATA: Final = AttemptRecord.__dict__["_data"].__set__
_SET_ENDING: Final = AttemptRecord.__dict__["_ending"].__set__


def duration_of(data: Mapping[str, Any]) -> float | None:
    """:attr:`AttemptRecord.duration_ms` of the record's stored JSON object ``data``: for a
    reader of a field or two of every attempt (the summary), without making the record."""
    value = data.get("durationMs")
    return value if isinstance(value, _NUMBER) and not isinstance(value, bool) else None


def usage_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """:attr:`AttemptRecord.usage` of the record's stored JSON object ``data`` (read-only), as
    :func:`duration_of`."""
    usage = data.get("usage")
    if usage.__class__ is not dict:
        return _EMPTY
    for value in usage.values():  # type: ignore[union-attr]
        if value.__class__ is dict or value.__class__ is list:
            return freeze(usage)  # type: ignore[no-any-return]
    return MappingProxyType(usage)  # type: ignore[arg-type]  # flat counts, the common case: read-only without a copy


def ending_of(record: AttemptRecord) -> endings.Ending:
    """The store's per-record summary, decoded (and so checked) when the record is stored:
    readers of endings never decode the record again."""
    return record.ending


__all__ = ["AttemptRecord", "duration_of", "ending_of", "usage_of"]
