"""The key index costs little per case (issue 16): a run of 100,000 cases × 1 trial keeps one key
index for its attempts and gradings, and a dict entry with a key tuple per variant and case was
its biggest holder (bench/perf16_memory.md)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from mst.runs.records import KeyIndex

# Bytes per case of two variants × one trial: 282-332 with a dict entry and a tuple per variant and
# case, 90-113 with the case numbered once and each block's first slot in an array (the figure
# steps with the dicts' sizes).
PER_CASE_LIMIT = 150


def _held(cases: int, trials: int) -> int:
    # The case ids made first, as a run's resolved cases hold them: the index keeps those strings.
    ids = [f"case-{c:06d}" for c in range(cases)]
    keys = [(v, case, t) for case in ids for v in ("base", "cand") for t in range(trials)]
    tracemalloc.start()
    try:
        index: KeyIndex[tuple[str, str, int]] = KeyIndex()
        for key in keys:
            index.slot(key)
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_the_key_index_of_one_trial_cases_is_small() -> None:
    per_case = (_held(20_000, 1) - _held(2_000, 1)) / 18_000
    assert per_case < PER_CASE_LIMIT, f"the key index: {per_case:.0f} bytes per case (two variants, one trial)"


def test_the_key_index_of_many_trials_costs_a_few_bytes_per_attempt() -> None:
    per_attempt = (_held(4_000, 10) - _held(400, 10)) / (3_600 * 20)
    assert per_attempt < 30, f"the key index: {per_attempt:.0f} bytes per attempt"


def test_keys_in_any_order_keep_their_slots_and_sort_as_their_keys() -> None:
    rng = random.Random(7)
    trial_keys = [(v, f"c{c}", t) for v in ("b", "a", "zz") for c in rng.sample(range(60), 25)
                  for t in rng.sample(range(40), 6)]
    others = [("cand", f"c{c}") for c in range(5)] + [("v", "c", -1)]
    keys: list[object] = [*trial_keys, *others]
    rng.shuffle(keys)
    index: KeyIndex[object] = KeyIndex()
    slots = {key: index.slot(key) for key in keys}
    assert len(set(slots.values())) == len(keys)
    assert all(index.key(slot) == key and index.find(key) == slot for key, slot in slots.items())
    assert all(index.slot(key) == slot for key, slot in slots.items())  # found, not given again
    in_order = [index.key(s) for s in index.slots_in_key_order()]
    assert [k for k in in_order if k in slots] == sorted(trial_keys) + sorted(others)  # type: ignore[type-var]
    assert len(in_order) == len(index)  # every slot given out, blocks whole
    assert index.find(("a", "c-none", 0)) is None and index.find(("none", "c1", 0)) is None
    assert index.find(("a", trial_keys[0][1], 10**5)) is None


def test_a_trial_past_what_a_slot_owner_holds_is_refused() -> None:
    index: KeyIndex[tuple[str, str, int]] = KeyIndex()
    last = index.slot(("v", "c", 524_279))
    assert index.key(last) == ("v", "c", 524_279)
    with pytest.raises(ValueError, match="trials per case"):
        index.slot(("v", "c", 524_280))


def _comparisons_held(cases: int) -> int:
    """Bytes a comparisons index holds for ``cases`` pair keys, its case numbers shared with an
    attempts index that has them already (a run's comparisons come after its attempts)."""
    ids = [f"case-{c:06d}" for c in range(cases)]
    attempts: KeyIndex[tuple[str, str, int]] = KeyIndex()
    for case in ids:
        attempts.slot(("base", case, 0))
    pairs = [("cand", case) for case in ids]
    tracemalloc.start()
    try:
        index: KeyIndex[tuple[str, str]] = KeyIndex(cases_of=attempts)
        for key in pairs:
            index.slot(key)
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_pair_key_costs_a_few_bytes_when_the_cases_are_numbered_already() -> None:
    # ~140 bytes a pair as a key of its own (a dict entry, an int, the key kept); 12 as an array
    # entry and two owner entries.
    per_case = (_comparisons_held(20_000) - _comparisons_held(2_000)) / 18_000
    assert per_case < 20, f"a comparison's key: {per_case:.0f} bytes"


def test_pair_keys_keep_their_slots_and_sort_as_their_keys() -> None:
    rng = random.Random(3)
    attempts: KeyIndex[tuple[str, str, int]] = KeyIndex()
    cases = [f"c{c}" for c in rng.sample(range(50), 30)]
    for case in cases[:10]:
        attempts.slot(("a", case, 0))
    index: KeyIndex[tuple[str, str]] = KeyIndex(cases_of=attempts)
    pairs = [(cand, case) for cand in ("zz", "b", "a") for case in rng.sample(cases, 20)]
    rng.shuffle(pairs)
    slots = {key: index.slot(key) for key in pairs}
    assert sorted(slots.values()) == list(range(len(pairs)))  # a slot each, none more
    assert all(index.key(slot) == key and index.find(key) == slot for key, slot in slots.items())
    assert [index.key(s) for s in index.slots_in_key_order()] == sorted(pairs)
    assert index.find(("a", "c-none")) is None and index.find(("none", cases[0])) is None
    # The attempts' index numbered the pairs' new cases too, and finds its own keys as before.
    assert all(attempts.find(("a", case, 0)) is not None for case in cases[:10])
    assert attempts.find(("a", cases[-1], 0)) is None and len(attempts) == 10
    assert attempts.find(pairs[0]) is None  # the pairs are the other index's


def test_a_trial_key_takes_its_slot_in_one_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each attempt and its grading are stored through ``slot``: a trial key is read once there
    (its types checked once, its case looked up once), not found first and then checked again."""
    index: KeyIndex[object] = KeyIndex()
    monkeypatch.setattr(KeyIndex, "find", lambda self, key: pytest.fail(f"slot() looked {key!r} up through find()"))
    given = [index.slot(key) for key in [("b", "c1", 0), ("b", "c1", 3), ("a", "c1", 0), ("b", "c0", 9)]]
    assert given == [index.slot(("b", "c1", 0)), index.slot(("b", "c1", 3)), index.slot(("a", "c1", 0)),
                     index.slot(("b", "c0", 9))]  # found again, not given again
    assert index.key(given[1]) == ("b", "c1", 3) and index.key(given[3]) == ("b", "c0", 9)


def test_a_store_holds_all_keys_only_when_each_has_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    from mst.runs.records import RecordStore

    store: RecordStore[object, dict[str, int]] = RecordStore()
    keys = [("v", f"c{c}", t) for c in range(5) for t in range(3)]
    for key in keys:
        store[key] = {"n": 1}
    del store[keys[4]]
    store[("w", "c9", 0)] = {"n": 2}  # a key given a slot that is then not asked about
    monkeypatch.setattr(RecordStore, "__contains__", lambda self, key: pytest.fail("one look-up a key"))
    assert store.holds_all(k for k in keys if k != keys[4])
    assert not store.holds_all(keys)
    assert not store.holds_all([("v", "c0", 7)])  # in a block given out, not stored
    assert not store.holds_all([("v", "c-none", 0)]) and store.holds_all([])
