"""A trial's graded session: its transcript, then its grader events (docs/run-directory.md).

Grading stores no copy of the transcript and no per-trial grader file. The run's grader manifest
(``graders/manifest-<digest>.json``, one per graders configuration) and the trial's grading
record (its ``graders`` entries, which keep what the manifest does not imply) rebuild the
``grader.manifest`` event and one ``grader.result`` event per enabled grader, byte for byte the
events grading made, their provenance indexes continuing the transcript's. Read after the
transcript, they make the graded session: the events the graders saw, then what they found.

Runs an older mst wrote are read as they are: a record whose ``gradersPath`` names the trial's
own ``graders/<variant>/<case>/<trial>.jsonl`` (those events), or a folder
``graders/<variant>/<case>/<trial>/`` (``grader_manifest.json``, ``grader_results.json`` and
``session.jsonl``, the whole graded session). This module is the one place that puts a graded
session together; the report, ``mst experiments analyze`` and tests read one through it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from mst.graders.results import MANIFEST_EVENT, RESULT_EVENT, GraderRun, documents_of, result_of_entry
from mst.runs.grading_records import GraderValue, TrialGrading
from mst.runs.layout import RunPaths
from mst.session.events import Event
from mst.session.io import TranscriptError, parse_transcript, read_transcript

Documents = tuple[dict[str, Any] | None, list[dict[str, Any]]]  # (manifest, results)


class Manifests:
    """The grader manifests of one run, each read once however many trials name it: a run has
    one per graders configuration it was graded with (usually one)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.root = os.fspath(run_dir)
        self._held: dict[str, tuple[dict[str, Any], bytes]] = {}

    def get(self, rel: str) -> tuple[dict[str, Any], bytes]:
        """The manifest at ``rel`` and its compact encoding (the ``grader.manifest`` event's data)."""
        held = self._held.get(rel)
        if held is None:
            path = f"{self.root}/{rel}"
            try:
                with open(path, "rb") as fh:
                    manifest = orjson.loads(fh.read())
            except FileNotFoundError:
                raise TranscriptError(f"{path}: the grader manifest is missing") from None
            except orjson.JSONDecodeError as exc:
                raise TranscriptError(f"{path}: the grader manifest is not valid JSON: {exc}") from None
            if not isinstance(manifest, dict):
                raise TranscriptError(f"{path}: the grader manifest is not a JSON object")
            held = self._held[rel] = (manifest, orjson.dumps(manifest))
        return held


def is_manifest_path(rel: str) -> bool:
    """Whether a record's ``gradersPath`` names a run's grader manifest (not an older per-trial file)."""
    return rel.rsplit("/", 1)[-1].startswith("manifest-") and rel.endswith(".json")


def trial_record(run_dir: Path | str, variant: str, case: str, trial: int) -> TrialGrading | None:
    """The trial's grading record as the run holds it now (None: not graded)."""
    from mst.runs.run import open_run

    record: TrialGrading | None = open_run(Path(run_dir)).trial_grades.get((variant, case, trial))
    return record


def grader_documents_of(rel: str | None, values: Sequence[GraderValue], manifests: Manifests) -> Documents:
    """The manifest and the full results of a trial whose record has ``gradersPath`` ``rel`` and
    ``graders`` ``values``, in any format a run holds them; ``(None, [])`` when no grader ran on it."""
    if rel is None:
        return None, []
    if is_manifest_path(rel):
        manifest, _ = manifests.get(rel)
        return manifest, _results(values, manifest, f"{manifests.root}/{rel}")
    path = f"{manifests.root}/{rel}"
    if rel.endswith(".jsonl"):
        return grader_documents(Path(path))
    return _folder_documents(path)


def _results(values: Sequence[GraderValue], manifest: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The full results the record's entries stand for, against their manifest (at ``source``);
    each entry is a :class:`~mst.runs.grading_records.GraderValue`, in the order of the arguments."""
    try:
        return [result_of_entry(manifest, *g) for g in values]
    except ValueError as exc:
        raise TranscriptError(f"{source}: {exc}") from None


def _folder_documents(folder: str) -> Documents:
    """The oldest format: a trial's folder with ``grader_manifest.json`` and ``grader_results.json``."""
    docs: list[Any] = []
    for name in ("grader_manifest.json", "grader_results.json"):
        try:
            with open(f"{folder}/{name}", "rb") as fh:
                docs.append(orjson.loads(fh.read()))
        except FileNotFoundError:
            docs.append(None)
        except orjson.JSONDecodeError as exc:
            raise TranscriptError(f"{folder}/{name}: not valid JSON: {exc}") from None
    manifest, results = docs
    listed = results.get("results") if isinstance(results, dict) else None
    return (manifest if isinstance(manifest, dict) else None,
            [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else [])


def grader_events(run_dir: Path | str, variant: str, case: str, trial: int, *,
                  record: TrialGrading | None = None, base_index: int | None = None,
                  manifests: Manifests | None = None) -> list[Event]:
    """The trial's grader events, or ``[]`` when no grader ran on it. ``record`` is the trial's
    grading record (read from the run when not given); ``base_index`` the number of events of its
    transcript, where the grader events' indexes start (counted from the transcript when not given);
    ``manifests`` the run's manifests already read."""
    if record is None:
        record = trial_record(run_dir, variant, case, trial)
        if record is None:
            return []
    rel = record.graders_path
    if rel is None:
        return []
    root = os.fspath(run_dir)
    if rel.endswith(".jsonl"):  # a run an older mst graded: the trial's own grader file
        return read_transcript(f"{root}/{rel}")
    if not is_manifest_path(rel):  # older still: the graded session stored whole, in the trial's folder
        return [e for e in read_transcript(f"{root}/{rel}/session.jsonl")
                if e.get("type") in (MANIFEST_EVENT, RESULT_EVENT)]
    manifests = manifests if manifests is not None else Manifests(root)
    manifest, manifest_json = manifests.get(rel)
    if base_index is None:
        base_index = len(read_transcript(f"{root}/{RunPaths.transcript_rel(variant, case, trial)}"))
    results = _results(record.graders or (), manifest, f"{root}/{rel}")
    # The very encoder grading used, then the very parser a transcript is read with.
    events = GraderRun(manifest, results, base_index, manifest_json).events_jsonl()
    return parse_transcript(events, f"{root}/{rel}")


def graded_session(run_dir: Path | str, variant: str, case: str, trial: int, *,
                   record: TrialGrading | None = None, manifests: Manifests | None = None) -> list[Event]:
    """The whole graded session of one trial: the transcript's events, then its grader events.
    ``record`` and ``manifests`` as for :func:`grader_events`.

    Raises :class:`~mst.session.io.TranscriptError` when the transcript cannot be read.
    """
    transcript = read_transcript(f"{os.fspath(run_dir)}/{RunPaths.transcript_rel(variant, case, trial)}")
    return transcript + grader_events(run_dir, variant, case, trial, record=record, base_index=len(transcript),
                                      manifests=manifests)


def graded_trials(run_dir: Path) -> Iterator[tuple[str, str, int, dict[str, Any] | None, list[dict[str, Any]]]]:
    """``(variant, case, trial, manifest, results)`` of every trial graders ran on, in key order
    (each manifest read once), in whatever format the run holds them. Reads only the grading
    records, and of each only its grader entries (:func:`_trial_records`)."""
    manifests = Manifests(run_dir)
    records = _trial_records(run_dir)
    for key in sorted(records):
        record = records[key]
        try:
            values = [GraderValue.from_json(g) for g in record.get("graders") or ()]
        except ValueError as exc:
            raise TranscriptError(f"{run_dir}: the grading record of {'/'.join(map(str, key))}: {exc}") from None
        manifest, results = grader_documents_of(record["gradersPath"], values, manifests)
        yield key[0], key[1], key[2], manifest, results


def _trial_records(run_dir: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Each graded trial's grading record that names grader results, as stored, by key: the
    records :func:`mst.runs.run.open_run` would hold (``results.json``'s snapshot, then the
    lines of ``grading.jsonl``, a later one for a key replacing it), read as JSON only — a
    reader of one field of 2,000 records does not decode their verdicts, nor the attempts."""
    from mst.runs.files import read_journal
    from mst.runs.record_files import read_record_file

    records: dict[tuple[str, str, int], dict[str, Any]] = {}

    def keep(record: Any) -> None:
        if not isinstance(record, dict) or record.get("kind") == "pairwise":
            return
        key = (record.get("variant"), record.get("case"), record.get("trial"))
        if not (isinstance(key[0], str) and isinstance(key[1], str) and isinstance(key[2], int)):
            raise TranscriptError(f"{run_dir}: a trial's grading record without its variant, case and trial")
        if isinstance(record.get("gradersPath"), str):
            records[key] = record  # type: ignore[index]
        else:
            records.pop(key, None)  # type: ignore[arg-type]

    snapshot = run_dir / "results.json"
    if snapshot.is_file():
        for record, _ in read_record_file(snapshot, "results.json", "trials").records():
            keep(record)
    for record in read_journal(run_dir / "grading.jsonl"):
        keep(record)
    return records


def grader_documents(file: Path) -> Documents:
    """The manifest and results one per-trial grader file holds (:func:`mst.graders.documents_of`)."""
    return documents_of(read_transcript(file))


__all__ = [
    "Manifests",
    "graded_session",
    "graded_trials",
    "grader_documents",
    "grader_documents_of",
    "grader_events",
    "is_manifest_path",
    "trial_record",
]
