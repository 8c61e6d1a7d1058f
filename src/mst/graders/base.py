"""What every built-in grader receives and returns.

A grader is a function of one :class:`GraderInput` (the session, the shared lookups, its own
data-only configuration, and the case's ``expected`` value) to a :class:`Measurement`. Nothing
else reaches it, so a grader cannot read files, clocks or the environment even by accident, and
the same input always gives the same measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from mst.session.lookups import SessionLookups

Direction = Literal["higher", "lower"]


class GraderInput(NamedTuple):  # named tuples: ten of each are made for every trial graded
    session: Sequence[Mapping[str, Any]]
    lookups: SessionLookups
    config: Mapping[str, Any]
    expected: Any


class Measurement(NamedTuple):
    """A value (None when the evidence is missing) and a message saying what it is based on."""

    value: float | None
    message: str


GraderFn = Callable[[GraderInput], Measurement]
ConfigCheck = Callable[[Any], str | None]


# ``tuple.__new__`` skips the named tuple's Python-level ``__new__``: ten measurements and ten
# inputs are made for every trial graded, where that call was a visible share of the phase.
new_tuple: Final = tuple.__new__


def measured(value: float, message: str) -> Measurement:
    return new_tuple(Measurement, (float(value), message))  # type: ignore[no-any-return]


def unavailable(message: str) -> Measurement:
    return new_tuple(Measurement, (None, message))  # type: ignore[no-any-return]



def is_number(value: Any) -> bool:
    """A finite real number; bools are excluded because YAML ``yes`` is not a threshold."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class BuiltinGrader:
    """A registered built-in: its fixed identity and its computation.

    ``unit``, ``direction``, ``min`` and ``max`` define what the number means, so configuration
    may restate but never change them (an override would silently change an existing metric).
    ``config`` maps each accepted configuration key to a check returning an error or None.
    """

    id: str
    name: str
    description: str
    unit: str
    direction: Direction
    compute: GraderFn
    default: bool
    threshold: float | None = None
    min: float | None = None
    max: float | None = None
    config: Mapping[str, ConfigCheck] | None = None
    version: int = 1
    # Its stable identity, made once (every result of every trial carries it); read-only.
    implementation: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "implementation", {"id": f"mst.builtin/{self.id}", "version": self.version})
