"""`plan_grading`'s resume check compares the run's case ids with the eval's as sorted lists, not
two sets (issue 16: a set is ~40 bytes an id and they were made beside each other)."""

from __future__ import annotations

import random
import tracemalloc

from mst.grading.phase import same_ids


def test_same_ids_is_set_equality() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = [rng.choice("abcdef") for _ in range(rng.randrange(6))]
        b = [rng.choice("abcdef") for _ in range(rng.randrange(6))]
        assert same_ids(a, b) == (set(a) == set(b)), (a, b)
    assert same_ids(["b", "a", "a"], ["a", "b"]) and not same_ids(["a"], ["a", "b"]) and same_ids([], [])


def test_same_ids_holds_a_list_of_each_not_a_set() -> None:
    ids = [f"case-{i:06d}" for i in range(50_000)]
    mixed = list(reversed(ids))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert same_ids(iter(ids), iter(mixed))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak / len(ids) < 30, f"same_ids held {peak / len(ids):.0f} bytes an id at its peak"
