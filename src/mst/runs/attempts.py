"""An attempt's record, typed: what a run holds for each (variant, case, trial).

The producer (the collector, a collect shard) writes the record as JSON to ``attempts.jsonl``;
a run keeps those bytes as they are and decodes a record, when read, into this frozen
:class:`AttemptRecord` — one codec (:meth:`AttemptRecord.from_json` / :meth:`to_json`), the way
:mod:`mst.endings` keeps its closed set. Fields a newer or older mst wrote that this one does not
name are kept in ``extra`` and written back in place, so nothing read is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from mst import endings
from mst.runs.frozen import JsonView

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_COMPLETED: Final = endings.to_json(endings.COMPLETED)  # most attempts: decoded without building one
_KNOWN: Final = frozenset({"variant", "case", "trial", "try", "ending", "infrastructureError", "answer",
                           "transcript", "artifacts", "durationMs", "usage", "diagnostics"})


@dataclass(frozen=True, slots=True)
class AttemptRecord(JsonView):
    """One attempt: its key, its ending (decided once, by its producer) and where its files are.

    Read it by attribute. It also reads as the (immutable) JSON object it is stored as —
    ``record["ending"]`` — for code that speaks the file format; assigning to it raises.
    """

    variant: str
    case: str
    trial: int
    try_number: int
    ending: endings.Ending
    answer: str | None = None
    transcript: str | None = None  # relative to the run directory
    artifacts: str | None = None
    duration_ms: float | None = None
    usage: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    diagnostics: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)  # fields this version does not name, as read

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.variant, self.case, self.trial)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "variant": self.variant, "case": self.case, "trial": self.trial, "try": self.try_number,
            "ending": endings.to_json(self.ending), "infrastructureError": endings.infrastructure_error(self.ending),
            "answer": self.answer, "transcript": self.transcript, "artifacts": self.artifacts,
            "durationMs": self.duration_ms, "usage": dict(self.usage),
        }
        if self.diagnostics is not None:
            out["diagnostics"] = dict(self.diagnostics)
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptRecord:
        """Decode a stored record (one written before endings existed is mapped, see
        :func:`mst.endings.from_record`); raises ``KeyError``/``ValueError`` on a corrupt one."""
        usage = data.get("usage")
        extra = None if data.keys() <= _KNOWN else {k: v for k, v in data.items() if k not in _KNOWN}
        stored = data.get("ending")
        ending = endings.COMPLETED if stored == _COMPLETED else endings.from_record(
            data if isinstance(data, dict) else dict(data))
        return cls(
            str(data["variant"]), str(data["case"]), int(data["trial"]), int(data.get("try") or 1), ending,
            data.get("answer"), data.get("transcript"), data.get("artifacts"), data.get("durationMs"),
            MappingProxyType(usage) if isinstance(usage, dict) else _EMPTY, data.get("diagnostics"),
            MappingProxyType(extra) if extra else _EMPTY,
        )


def ending_of(record: AttemptRecord) -> endings.Ending:
    """The store's per-record summary: readers of endings never decode the record again."""
    return record.ending


__all__ = ["AttemptRecord", "ending_of"]
