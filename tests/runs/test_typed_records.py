"""A run's records are typed and immutable, with one codec each that keeps the stored bytes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from mst.grading import CaseComparison, RecordError, TrialGrading
from mst.runs.attempts import AttemptRecord
from mst.runs.layout import RunPaths
from mst.runs.run import Run, open_run

ATTEMPT: dict[str, Any] = {
    "variant": "v", "case": "c", "trial": 0, "try": 1, "ending": {"kind": "trial", "outcome": "completed"},
    "infrastructureError": None, "answer": "42", "transcript": "transcripts/v/c/0.jsonl", "artifacts": None,
    "durationMs": 12.5, "usage": {"inputTokens": 3}, "diagnostics": {"turns": 1},
}
GRADING: dict[str, Any] = {
    "variant": "v", "case": "c", "trial": 0, "status": "ungraded", "passed": None,
    "verdicts": [{"judge": "equals", "kind": "assertion", "identity": "sha256:a", "passed": True, "score": None,
                  "reason": "ok"},
                 {"judge": "j", "kind": "code", "identity": "sha256:j", "passed": False, "score": 0.2, "reason": None,
                  "usage": {"tokens": 5}, "durationMs": 1.5}],
    "errors": [{"judge": "grader:loops", "kind": "grader", "identity": None, "message": "boom"}],
    "graders": [{"id": "loops", "value": None, "status": "error"}], "gradersPath": "graders/v/c/0",
}
COMPARISON: dict[str, Any] = {
    "kind": "pairwise", "case": "c", "candidate": "cand", "baseline": "base", "judge": "p", "identity": "sha256:p",
    "pairs": [{"trial": 0, "ab": "candidate", "ba": "candidate", "preference": "candidate",
               "reasons": {"ab": "x", "ba": None}, "usage": [{"t": 1}], "durationMs": 2.0}],
    "wins": 1, "ties": 0, "losses": 0, "preference": "candidate", "errors": [{"trial": 1, "message": "lost"}],
}


def test_each_codec_gives_back_the_bytes_it_read() -> None:
    for cls, doc in ((AttemptRecord, ATTEMPT), (TrialGrading, GRADING), (CaseComparison, COMPARISON)):
        assert orjson.dumps(cls.from_json(doc).to_json()) == orjson.dumps(doc)  # type: ignore[attr-defined]
    older = {**ATTEMPT, "failureKind": None, "note": "kept"}  # fields this version does not name
    assert AttemptRecord.from_json(older).to_json() == older


def test_the_journal_encodes_each_shared_grader_entry_once_to_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``journal_json`` gives the bytes ``to_json`` does; a grader value object seen again (one
    the defaults share between trials) is encoded once, at its second sight, and is its bytes
    from then on; a value equal to it but another object is its own."""
    from mst.runs import grading_records
    entries = [{"id": "a", "value": 0.5, "status": "pass"}, {"id": "b", "value": None, "status": "error",
                                                            "message": "no session"},
               {"id": "c", "value": -0.0, "status": "fail", "diagnostics": [{"x": 1}]}]
    first = TrialGrading.from_json({**GRADING, "graders": entries})
    other = TrialGrading.from_json({**GRADING, "graders": entries})
    assert first.graders is not None and other.graders is not None
    second = dataclasses.replace(first, trial=1, graders=(*first.graders[:2], other.graders[2]))
    encoded: list[Any] = []
    dumps = orjson.dumps
    monkeypatch.setattr(grading_records.orjson, "dumps", lambda v, *a: encoded.append(v["id"]) or dumps(v, *a))
    kinds = []
    for record in (first, second, first, first):
        journaled = record.journal_json()
        kinds.append([e.__class__ for e in journaled["graders"]])
        assert dumps(journaled) == dumps(record.to_json())
    assert encoded == ["a", "b", "c"]
    fragment = orjson.Fragment
    assert kinds == [[dict] * 3, [fragment, fragment, dict], [fragment] * 3, [fragment] * 3]


def test_the_attempts_graded_round_trip_and_stay_optional() -> None:
    """``try`` and ``tries`` name the attempts a record graded (an attempt collected again is
    graded again); records written before them decode with none and are written back without."""
    graded = {**GRADING, "try": 2}
    trial = TrialGrading.from_json(graded)
    assert trial.try_number == 2 and dataclasses.replace(trial, graders_path="g").try_number == 2
    assert orjson.dumps(trial.to_json()) == orjson.dumps(graded)
    assert TrialGrading.from_json(GRADING).try_number is None
    assert dataclasses.replace(TrialGrading.from_json(GRADING), try_number=3).to_json()["try"] == 3
    compared = {**COMPARISON, "tries": {"0": [2, 1]}}
    comparison = CaseComparison.from_json(compared)
    assert comparison.tries == {"0": (2, 1)}
    assert orjson.dumps(comparison.to_json()) == orjson.dumps(compared)
    assert CaseComparison.from_json(COMPARISON).tries is None
    assert CaseComparison.from_json(COMPARISON).with_tries({"0": (1, 1)}).to_json()["tries"] == {"0": [1, 1]}
    with pytest.raises(RecordError, match="tries"):
        CaseComparison.from_json({**COMPARISON, "tries": {"0": [1]}})


def test_a_malformed_grading_is_named() -> None:
    with pytest.raises(RecordError, match="passed"):
        TrialGrading.from_json({**GRADING, "verdicts": [{"judge": "x"}]})


def test_read_records_cannot_be_changed_in_place(tmp_path: Path) -> None:
    meta = {"schema": "mst.run/v1", "id": "r", "eval": {"name": "e", "path": "/x", "digest": "d"},
            "variants": [{"id": "v"}], "cases": [{"id": "c", "trials": 1}],
            "phases": {"collect": "complete", "grade": "partial"}}
    run = Run(RunPaths(tmp_path), meta)
    run.attempts[("v", "c", 0)] = AttemptRecord.from_json(ATTEMPT)
    run.trial_grades[("v", "c", 0)] = TrialGrading.from_json(GRADING)
    run.comparisons[("cand", "c")] = CaseComparison.from_json(COMPARISON)
    run.write()
    opened = open_run(tmp_path)
    attempt, grading = opened.attempts[("v", "c", 0)], run.trial_grades[("v", "c", 0)]
    with pytest.raises(TypeError):
        attempt["answer"] = "changed"  # type: ignore[index]  # used to change a copy, silently
    with pytest.raises(AttributeError):
        attempt.answer = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        grading["status"] = "graded"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        grading.errors = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        run.comparisons[("cand", "c")].pairs.append(None)  # type: ignore[attr-defined]
    assert opened.attempts[("v", "c", 0)].answer == "42" and attempt["ending"] == ATTEMPT["ending"]
    assert opened.ending(("v", "c", 0)).outcome == "completed"  # type: ignore[union-attr]


def test_run_metadata_is_immutable_and_changes_by_copy() -> None:
    from mst.runs.meta import RunMeta

    head = {"schema": "mst.run/v1", "id": "r", "eval": {"name": "e", "path": "/x", "digest": "d"},
            "variants": [{"id": "v"}], "cases": [{"id": "c", "trials": 1}], "futureField": {"kept": True},
            "phases": {"collect": "complete", "grade": "partial"}}
    meta = RunMeta.from_json(head)
    with pytest.raises(TypeError):
        meta["phases"] = {}  # type: ignore[index]
    with pytest.raises(AttributeError):
        meta.phases = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.phases.grade = "complete"  # type: ignore[misc]
    done = meta.with_phases(grade="complete")
    assert meta.phases.grade == "partial" and done.phases.grade == "complete"
    assert list(done.to_json()) == list(head) and done.to_json()["futureField"] == {"kept": True}
    assert meta.to_json() == head


def test_the_summary_decodes_once_and_reads_as_its_file() -> None:
    from mst.runs.summary import Summary

    doc = {"schema": "mst.summary/v1", "run": "r", "eval": "e", "regradeOf": None,
           "phases": {"collect": "complete", "grade": "complete"}, "casePass": {"atLeast": 0.5},
           "totals": {"attempts": 2, "trials": 2, "infrastructureFailures": 0, "cases": 1, "incompleteCases": 1},
           "variants": [{"id": "v", "baseline": True, "client": "agent", "model": None,
                         "cases": {"total": 1, "passed": 0, "failed": 0, "incomplete": 1}, "needsFix": []}]}
    summary = Summary.from_json(doc)
    assert summary.to_json() == doc and orjson.dumps(summary.to_json()) == orjson.dumps(doc)
    assert not summary.complete and summary.totals.incomplete_cases == 1
    assert summary["variants"][0]["cases"]["incomplete"] == 1  # the file's shape, read-only
    with pytest.raises(TypeError):
        summary["totals"]["incompleteCases"] = 0
    with pytest.raises(TypeError):
        summary.variants[0].figures["cases"]["passed"] = 1  # type: ignore[index]


def test_pair_records_decode_alike_inline_and_checked() -> None:
    """A pair of the shape mst writes is read inline; any other goes through the checked path,
    which decodes the same record or names what is wrong."""
    from mst.runs.grading_records import PairRecord

    pair = {"trial": 2, "ab": "candidate", "ba": "tie", "preference": "tie", "reasons": {"ab": "x", "ba": None},
            "usage": [{"inputTokens": 1}], "durationMs": 0.5}
    assert PairRecord.from_json(pair) == PairRecord._checked(pair)
    assert PairRecord.from_json(pair).to_json() == pair
    assert PairRecord.from_json({**pair, "trial": "2"}).trial == 2  # a string trial, as before
    with pytest.raises(RecordError, match="sides"):
        PairRecord.from_json({**pair, "ab": "left"})
    with pytest.raises(RecordError, match="'ba'"):
        PairRecord.from_json({"trial": 0, "ab": "tie", "preference": "tie"})
    with pytest.raises(RecordError, match="sides"):
        PairRecord.from_json({**pair, "ab": ["tie"]})  # unhashable: still the checked path's error


def test_decoded_pairs_share_one_string_per_side() -> None:
    """A summary holds every pair's sides at once (runs/summary.py ``_pairwise``): decoded
    pairs refer to the shared side strings, not to a fresh decoded copy each."""
    from mst.runs.grading_records import SIDES, PairRecord

    records = [PairRecord.from_json(orjson.loads(b'{"trial":0,"ab":"candidate","ba":"tie","preference":"baseline"}'))
               for _ in range(3)]
    for pair in records:
        assert pair.ab is SIDES[0] and pair.ba is SIDES[2] and pair.preference is SIDES[1]
