"""A resolved eval's cases are kept as columns (:class:`mst.config.resolved.CaseTable`, issue 16):
they must read back as the cases they were made from — ids, tasks, trials, assertions, judges,
mock scripts, tasks JSON would change — be found by id, and cost far less than an object per
case (bench/perf16_memory.md)."""

from __future__ import annotations

import tracemalloc
from datetime import date
from pathlib import Path

import orjson
import pytest

from mst.config.models import Assertion
from mst.config.resolve import resolve_eval
from mst.config.resolved import CaseTable, ResolvedCase, ResolvedJudge, _View

_JUDGE = ResolvedJudge("j", "m:f", "code", {}, 0.5, "1", "sha256:x")


def _cases() -> list[ResolvedCase]:
    shared: tuple[Assertion, ...] = ()
    return [
        ResolvedCase("a", "p1", "2", {}, 1, shared, ()),
        ResolvedCase("c", "p2", {"x": [1, 2.5, None]}, {"k": "v"}, 3, shared, (_JUDGE,), mock={"answer": "x"}),
        ResolvedCase("b", "p3", date(2026, 1, 2), {}, 2, shared, ()),  # JSON would change it: kept as is
        ResolvedCase("d", "p4", -0.0, {}, 1, shared, (_JUDGE,)),
    ]


def test_the_table_reads_back_the_cases_it_was_made_from() -> None:
    cases = _cases()
    table = CaseTable(cases)
    assert len(table) == 4 and list(table) == cases and table == tuple(cases) and tuple(cases) == table
    assert table[1] == cases[1] and table[-1] == cases[-1] and table[1:3] == tuple(cases[1:3])
    assert table[2].expected is cases[2].expected  # the odd task, not a copy
    assert table[1].mock == {"answer": "x"} and table[0].mock is None
    assert table[1].judges == (_JUDGE,) and table[1].judges is cases[1].judges
    assert table[3].task() == ("p4", -0.0, {}) and str(table[3].expected) == "-0.0"
    assert list(table.id_trials()) == [("a", 1), ("c", 3), ("b", 2), ("d", 1)]
    assert list(table.ids) == ["a", "c", "b", "d"] and list(table.trials) == [1, 3, 2, 1]
    with pytest.raises(IndexError):
        table[4]


def test_each_read_is_a_fresh_view_and_its_task_a_fresh_copy() -> None:
    table = CaseTable(_cases())
    first, again = table[1], table[1]
    assert first == again and first is not again
    first.expected["x"].append(9)
    assert table[1].expected == {"x": [1, 2.5, None]}
    with pytest.raises(AttributeError):
        first.trials = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del first.id
    assert type(first) is ResolvedCase and type(table.find("c")) is ResolvedCase


def test_a_view_is_made_by_plain_slot_stores() -> None:
    """A view is made as a :class:`_View` (plain stores: both of its setattr and delattr the
    generic ones, or CPython sends every store through a Python-level lookup), then made a
    ``ResolvedCase``: ~4.0 k instructions a view against ~8.8 k through the slots' setters
    (bench/perf16_collect.md "Session 11"; a test of the structure, not of time)."""
    assert _View.__setattr__ is object.__setattr__ and _View.__delattr__ is object.__delattr__
    assert _View.__init__ is object.__init__ and _View.__slots__ == ()
    assert _View.__mro__[1] is ResolvedCase and "__dict__" not in dir(_View)


def test_a_case_is_found_by_its_id() -> None:
    table = CaseTable(_cases())
    assert [table.find(i).id for i in "dcba"] == list("dcba")  # type: ignore[union-attr]
    assert table.find("e") is None and table.find("") is None and table.find("bb") is None


def test_an_eval_repeating_a_case_id_names_where_the_first_is(tmp_path: Path) -> None:
    from mst.config.errors import UserError
    rows = [{"id": "x", "prompt": "p"}, {"id": "y", "prompt": "p"}, {"id": "x", "prompt": "q"}]
    (tmp_path / "cases.jsonl").write_bytes(b"\n".join(map(orjson.dumps, rows)))
    (tmp_path / "eval.yaml").write_text("name: e\nvariants: [{id: v, client: agent, model: mock}]\n"
                                        "datasets: [{path: cases.jsonl}]\n")
    with pytest.raises(UserError) as caught:
        resolve_eval(tmp_path / "eval.yaml")
    assert "cases.jsonl:3 repeats the one at " in str(caught.value) and "cases.jsonl:1" in str(caught.value)


# Bytes per case of a resolved eval of plain dataset rows: 292 as an object per case (its task's
# bytes, its interned id; cb54c55), 193 as columns, 122 with the ids not interned (the dict of
# interned strings held ~46 B a case); the id strings (~60 B) are the largest part left.
PER_CASE_LIMIT = 150


def _held(tmp_path: Path, cases: int) -> int:
    folder = tmp_path / f"e{cases}"
    folder.mkdir()
    rows = (orjson.dumps({"id": f"case-{i:06d}", "prompt": f"What is {i} plus {i}?", "expected": str(2 * i)})
            for i in range(cases))
    (folder / "cases.jsonl").write_bytes(b"\n".join(rows))
    (folder / "eval.yaml").write_text("name: e\nvariants: [{id: v, client: agent, model: mock}]\n"
                                      "assertions: [{type: final-answer}]\ndatasets: [{path: cases.jsonl}]\n")
    tracemalloc.start()
    try:
        resolved = resolve_eval(folder / "eval.yaml")
        assert len(resolved.cases) == cases
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_the_resolved_cases_are_small(tmp_path: Path) -> None:
    _held(tmp_path, 10)
    per_case = (_held(tmp_path, 30_000) - _held(tmp_path, 3_000)) / 27_000
    assert per_case < PER_CASE_LIMIT, f"resolved cases: {per_case:.0f} bytes per case"


def test_the_judges_secret_names_read_the_distinct_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grading environment's secrets are those the judges name, in the order of the cases
    that first name them: read from the table's distinct (assertions, judges) pairs, with no
    case made per row (it made three a case of a run: issue 16)."""
    from types import SimpleNamespace

    from mst.config.secrets import judge_secret_names

    a = ResolvedJudge("a", "m:f", "code", {}, 0.5, "1", "sha256:a", secrets=("K2", "K1"))
    b = ResolvedJudge("b", "m:f", "code", {}, 0.5, "1", "sha256:b", secrets=("K1", "K3"))
    one, two, none = (a,), (b, a), ()
    table = CaseTable()
    for i, judges in enumerate([none, two, one, two, none]):
        table.add(f"c{i}", "p", None, {}, 1, (), judges)
    assert [j for _, js in table.profiles for j in js] == [b, a, a]

    def no_view(self: CaseTable, row: int) -> ResolvedCase:
        raise AssertionError("a case was made")

    monkeypatch.setattr(CaseTable, "_case", no_view)
    pairwise = ResolvedJudge("p", "m:f", "code", {}, 0.5, "1", "sha256:p", secrets=("K4", "K1"))
    resolved = SimpleNamespace(cases=table, pairwise=pairwise)
    assert judge_secret_names(resolved) == ["K1", "K3", "K2", "K4"]  # type: ignore[arg-type]
