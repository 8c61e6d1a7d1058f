"""A resolved case keeps its task as JSON bytes only when they read back as the very same values
(``mst.config.resolved._packed_task``): the quick path for plain rows must agree with the full
round trip for every value it takes."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import pytest

from mst.config import resolved as resolved_module
from mst.config.resolved import ResolvedCase


class _Text(str):
    pass


PLAIN = ["2", "", 'é\\n"', None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, -0.0, 1e308]
KEPT = [float("nan"), float("inf"), -float("inf"), _Text("x"), (1, 2), date(2026, 1, 2), 2**64, -(2**63) - 1, "\ud800"]


@pytest.mark.parametrize("expected", PLAIN, ids=repr)
def test_a_plain_row_is_kept_as_bytes_that_read_back_the_same(expected: Any) -> None:
    case = ResolvedCase("c", "prompt", expected, {}, 1, (), ())
    assert type(case._task) is bytes
    prompt, back, metadata = case.task()
    assert (prompt, back, metadata) == ("prompt", expected, {})
    assert type(back) is type(expected)
    if type(expected) is float:  # -0.0 stays negative
        assert math.copysign(1, back) == math.copysign(1, expected)


@pytest.mark.parametrize("expected", KEPT, ids=repr)
def test_a_value_json_would_change_is_kept_as_it_is(expected: Any) -> None:
    case = ResolvedCase("c", "prompt", expected, {}, 1, (), ())
    assert type(case._task) is tuple
    back = case.expected
    assert back is expected or (back != back and expected != expected)  # nan is nan


def test_the_quick_path_is_only_a_quick_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it every plain value is still packed: the full round trip agrees."""
    monkeypatch.setattr(resolved_module, "_plain", lambda value: False)
    for expected in PLAIN:
        assert type(ResolvedCase("c", "p", expected, {}, 1, (), ())._task) is bytes
    for expected in KEPT:
        assert type(ResolvedCase("c", "p", expected, {}, 1, (), ())._task) is tuple


def test_a_prompt_or_metadata_json_would_change_is_kept() -> None:
    assert type(ResolvedCase("c", _Text("p"), "2", {}, 1, (), ())._task) is tuple
    assert type(ResolvedCase("c", "p", "2", {"when": date(2026, 1, 2)}, 1, (), ())._task) is tuple
    assert type(ResolvedCase("c", "p", "2", {"n": 1}, 1, (), ())._task) is bytes  # the full round trip
