"""What `plan_grading` reads holds little per case (issue 16). Its resume check compares the
run's case ids with the eval's as sorted lists, not two sets (a set is ~40 bytes an id, and two
were made beside each other), and each case's judge ids are codes into the distinct lists
(`JudgeSets`), not a dict (~38 bytes a case held through the whole run)."""

from __future__ import annotations

import random
import tracemalloc
from array import array
from types import MappingProxyType

from mst.grading.context import JudgeSets
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


def _sets(cases: int) -> tuple[JudgeSets, dict[str, list[str]]]:
    lists = [["a", "b"], [], ["c"]]
    ids = [f"case-{i:06d}" for i in range(cases)]
    codes = array("H", (i % 7 % 3 for i in range(cases)))
    return JudgeSets(ids, codes, lists), {c: lists[i % 7 % 3] for i, c in enumerate(ids)}


def test_judge_sets_read_as_the_dict_they_replace() -> None:
    sets, plain = _sets(50)
    assert len(sets) == 50 and list(sets) == list(plain) and list(sets.items()) == list(plain.items())
    assert sets["case-000004"] == plain["case-000004"] and sets.get("nope") is None and "case-000001" in sets
    assert sets == plain and plain == sets and MappingProxyType(plain) == sets and sets == MappingProxyType(sets)
    assert dict(sets.items()) == plain
    changed = {**plain, "case-000004": ["z"]}
    assert sets != changed and changed != sets and sets != {**plain, "extra": []} and sets != []
    fewer = dict(plain)
    del fewer["case-000000"]
    assert sets != {**fewer, "other": plain["case-000000"]}


def test_judge_sets_hold_a_few_bytes_a_case() -> None:
    # A dict of 100,000 cases' lists held ~38 bytes a case through the whole run (session 9).
    ids = [f"case-{i:06d}" for i in range(50_000)]
    lists = [["a"], []]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        codes = array("H")
        for i in range(len(ids)):
            codes.append(i % 2)
        sets = JudgeSets(list(ids), codes, lists)
        assert sum(1 for _ in sets.items()) == len(ids)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held / len(ids) < 12, f"{held / len(ids):.1f} bytes a case"
