"""Read-only JSON: what a typed record gives code that speaks its file format.

A typed record (an attempt, the summary) reads by attribute; it also reads as the JSON object it
is stored as, for code written against the files. That view is frozen all the way down — objects
are read-only mappings, arrays tuples — so writing into it raises instead of changing a copy that
is then silently dropped.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any


def freeze(value: Any) -> Any:
    """``value`` (JSON data) with every object read-only and every array a tuple."""
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


class JsonView(Mapping[str, Any]):
    """A read-only mapping over ``to_json()``, for a frozen dataclass that defines it."""

    __slots__ = ()

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The record as the JSON it is stored as."""

    def __getitem__(self, name: str) -> Any:
        return freeze(self.to_json()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


__all__ = ["JsonView", "freeze"]
