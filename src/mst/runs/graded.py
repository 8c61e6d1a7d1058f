"""A trial's graded session: its transcript, then its grader events (docs/run-directory.md).

Grading stores no copy of the transcript. Each graded trial has one grader file,
``graders/<variant>/<case>/<trial>.jsonl``, holding a ``grader.manifest`` event and one
``grader.result`` event per enabled grader, their provenance indexes continuing the transcript's.
Read after the transcript, it makes the graded session: the events the graders saw, then what
they found. This module is the one place that puts the two together; the report, ``mst experiments
analyze`` and tests read a graded session through it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mst.graders.results import documents_of
from mst.runs.layout import RunPaths
from mst.session.events import Event
from mst.session.io import TranscriptError, read_transcript


def grader_events(run_dir: Path | str, variant: str, case: str, trial: int) -> list[Event]:
    """The trial's grader events, or ``[]`` when it has no grader file (no grader ran on it)."""
    path = f"{os.fspath(run_dir)}/{RunPaths.graders_rel(variant, case, trial)}"
    try:
        return read_transcript(path)
    except TranscriptError:
        if not os.path.exists(path):
            return []
        raise


def graded_session(run_dir: Path | str, variant: str, case: str, trial: int) -> list[Event]:
    """The whole graded session of one trial: the transcript's events, then its grader events.

    Raises :class:`~mst.session.io.TranscriptError` when the transcript cannot be read.
    """
    transcript = read_transcript(f"{os.fspath(run_dir)}/{RunPaths.transcript_rel(variant, case, trial)}")
    return transcript + grader_events(run_dir, variant, case, trial)


def grader_files(run_dir: Path) -> Iterator[tuple[str, str, str, Path]]:
    """``(variant, case, trial, file)`` of every trial's grader file, in sorted order."""
    for file in sorted((run_dir / "graders").glob("*/*/*.jsonl")):
        yield file.parent.parent.name, file.parent.name, file.stem, file


def grader_documents(file: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The manifest and results one grader file holds (:func:`mst.graders.documents_of`)."""
    return documents_of(read_transcript(file))


__all__ = ["graded_session", "grader_documents", "grader_events", "grader_files"]
