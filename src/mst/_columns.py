"""Pairs held as two columns: a sequence of ``(first, second)`` tuples stored as two flat
sequences (typically ``array``s), because a list of tuples costs 64-110 bytes a pair where two
arrays cost 12-16 (issue 16's memory per case; docs/run-directory.md). A leaf module: the report's
case list and the comparison's paired values both use it."""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence, Sequence
from typing import Generic, TypeVar, overload

A = TypeVar("A")
B = TypeVar("B")


class ColumnPairs(Sequence[tuple[A, B]], Generic[A, B]):
    """Reads like ``list[tuple[A, B]]``; appends go to the two columns (``first``, ``second``)."""

    __slots__ = ("first", "second")

    def __init__(self, first: MutableSequence[A], second: MutableSequence[B]) -> None:
        self.first = first
        self.second = second

    def append(self, a: A, b: B) -> None:
        self.first.append(a)
        self.second.append(b)

    def __len__(self) -> int:
        return len(self.first)

    @overload
    def __getitem__(self, index: int) -> tuple[A, B]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[A, B]]: ...

    def __getitem__(self, index: int | slice) -> tuple[A, B] | list[tuple[A, B]]:
        if isinstance(index, slice):
            return list(zip(self.first[index], self.second[index], strict=True))
        return self.first[index], self.second[index]

    def __iter__(self) -> Iterator[tuple[A, B]]:
        return zip(self.first, self.second, strict=True)
