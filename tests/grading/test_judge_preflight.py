"""The judge preflight stops a grading before any judge gives a verdict, naming what is missing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tests.helpers import load, run_cli
from tests.runners.judge_gateway import needy_eval
from tests.runners.runners_helpers import collected_run, new_run

from mst.config.resolved import ResolvedJudge
from mst.grading.preflight import JudgeNeeds, Keys, check, register_needs


def _regrade_count(run: Path) -> int:
    return len([p for p in run.parent.iterdir() if p.is_dir()])


@pytest.mark.parametrize(("needs", "said"), [
    ({"binaries": ("mst-no-such-program",)}, "the program 'mst-no-such-program' is not on PATH"),
    ({"imports": ("mst_no_such_module",)}, "the Python module 'mst_no_such_module' does not import"),
    ({"env": ("MST_PREFLIGHT_KEY",)}, "the key MST_PREFLIGHT_KEY is not in the environment or the secrets file"),
])
def test_local_grade_stops_before_any_verdict(tmp_path: Path, needs: dict[str, tuple[str, ...]], said: str) -> None:
    run = collected_run(tmp_path, needy_eval(tmp_path, **needs))
    count = _regrade_count(run)
    proc = run_cli("grade", str(run), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"judge preflight: judge 'needy': {said}" in proc.stderr
    assert _regrade_count(run) == count  # no regrade was even started


def test_local_run_stops_before_collecting(tmp_path: Path) -> None:
    path = needy_eval(tmp_path, imports=("mst_no_such_module",))
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "judge 'needy'" in proc.stderr and "install the package" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any(p.is_dir() for p in (tmp_path / "runs").iterdir())


def test_a_key_in_the_file_satisfies_it(tmp_path: Path) -> None:
    run = collected_run(tmp_path, needy_eval(tmp_path, env=("MST_PREFLIGHT_KEY",), binaries=("python3",)))
    (tmp_path / "keys.env").write_text("MST_PREFLIGHT_KEY=value-1234\n")
    proc = run_cli("grade", str(run), "--secrets-file", "keys.env", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_shards_need_the_key_in_the_secrets_file_not_the_environment(tmp_path: Path) -> None:
    run = collected_run(tmp_path, needy_eval(tmp_path, env=("MST_PREFLIGHT_KEY",)))
    count = _regrade_count(run)
    proc = run_cli("grade", str(run), "--runner", "process", "--runner-option", "shards=2", cwd=tmp_path,
                   env={"MST_PREFLIGHT_KEY": "ambient-only-5678"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "judge 'needy': the key MST_PREFLIGHT_KEY is not in the secrets file" in proc.stderr
    assert _regrade_count(run) == count  # stopped before any shard started


@pytest.mark.slow
@pytest.mark.parametrize(("needs", "said"), [
    ({"binaries": ("mst-no-such-program",)},
     "the program 'mst-no-such-program' is not on PATH; install it on this machine (for shards: in the worker image)"),
    ({"imports": ("mst_no_such_module",)}, "the Python module 'mst_no_such_module' does not import"),
])
def test_a_worker_that_lacks_what_a_judge_needs_fails_its_shard_before_grading(
        tmp_path: Path, needs: dict[str, tuple[str, ...]], said: str) -> None:
    # The coordinator does not need the judges' programs and modules; each worker checks its own machine.
    run = collected_run(tmp_path, needy_eval(tmp_path, **needs))
    before = {p for p in run.parent.iterdir() if p.is_dir()}
    proc = run_cli("grade", str(run), "--runner", "process", "--runner-option", "shards=2", cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # ungraded: the shards failed
    regrade = new_run(run.parent, before)
    shards = load(regrade / "run.json")["grading"]["runner"]["shards"]
    assert shards
    for shard in shards:
        assert f"judge preflight: judge 'needy': {said}" in shard["error"]
    trials = load(regrade / "results.json")["trials"]
    assert trials and all(not any(v["judge"] == "needy" for v in t["verdicts"]) for t in trials)


# --- the checks themselves ----------------------------------------------------------------------


def _judge(source: str = "fake-kind") -> ResolvedJudge:
    return ResolvedJudge(id="j", target="t", source=source, options={}, threshold=0.5, version="1", identity="i")


def test_a_program_that_cannot_say_its_version_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "brokencli"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    register_needs("fake-kind", lambda judge, base: JudgeNeeds(binaries=("brokencli", "python3")))
    (missing,) = check([_judge()], Keys(lambda name: True, "x"), None)
    assert missing.what == "'brokencli --version' exited with status 3 and no version"


def test_keys_only_skips_programs_and_modules() -> None:
    register_needs("fake-kind", lambda judge, base: JudgeNeeds(env=("K",), binaries=("mst-none",), imports=("x_y",)))
    missing = check([_judge()], Keys(lambda name: False, "the secrets file"), None, keys_only=True)
    assert [str(m) for m in missing] == ["judge 'j': the key K is not in the secrets file; "
                                         "add K=... to the secrets file"]


def test_an_unknown_kind_is_named() -> None:
    (missing,) = check([_judge("no-such-kind")], Keys(lambda name: True, "x"), None)
    assert "no preflight is known for judges of kind 'no-such-kind'" in str(missing)


def test_the_judges_of_an_eval_are_read_from_its_cases_once() -> None:
    """`mst run` asks for the eval's judges four times (with the grading context's judge sets),
    and each reading of its cases makes every case afresh: they are read once per resolved eval,
    the same judges, in the same order, as a reading of the cases gives; another eval (or a
    dropped one's successor) reads its own."""
    import gc
    from dataclasses import replace

    from mst.config.resolved import CaseTable, ResolvedCase, ResolvedEval
    from mst.grading.context import judge_sets
    from mst.grading.preflight import judges_of

    a, b, pair = (ResolvedJudge(id=n, target="t", source="code", options={}, threshold=0.5, version="1",
                                identity=f"i-{n}") for n in ("a", "b", "p"))
    again = replace(a, id="a2")  # the same identity: the later one is the judge, in the first's place
    assert again != a
    shared = (a, b)
    cases = [ResolvedCase(f"c{i}", "p", None, {}, 1, (), judges)
             for i, judges in enumerate([shared, shared, (b,), (), (again,), (again,), (b,)])]
    expected = [*{j.identity: j for c in cases for j in c.judges}.values(), pair]  # what a scan of every case gives
    resolved = ResolvedEval.__new__(ResolvedEval)
    object.__setattr__(resolved, "cases", CaseTable(cases))
    object.__setattr__(resolved, "pairwise", pair)
    reads: list[int] = []
    real_iter = CaseTable.__iter__

    def counted(table: CaseTable) -> object:
        reads.append(len(table))
        return real_iter(table)

    try:
        CaseTable.__iter__ = counted  # type: ignore[method-assign]
        first = judges_of(resolved)
        assert first == expected and [j.id for j in first] == ["a2", "b", "p"]
        first.append(a)  # the caller's own list
        assert judges_of(resolved) == expected and reads == [7]
        sets = judge_sets(resolved)  # the grading context's, from the same reading
        assert sets["c2"] == ["b"] and sets["c0"] == ["a", "b"] and sets["c3"] == [] and reads == [7]
        other = ResolvedEval.__new__(ResolvedEval)
        object.__setattr__(other, "cases", CaseTable(cases[3:4]))
        object.__setattr__(other, "pairwise", None)
        assert judges_of(other) == [] and reads == [7, 1]
        del resolved
        gc.collect()
        assert judges_of(other) == [] and reads == [7, 1]
    finally:
        CaseTable.__iter__ = real_iter  # type: ignore[method-assign]
