"""The run directory: its layout, the run model and its journals, progress, and the summary.

A run is a directory (``run.json``, ``attempts.jsonl``, transcripts, artifacts, grading files,
``summary.json``); see ``docs/run-directory.md``. Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mst._lazy import lazy_exports

if TYPE_CHECKING:
    from mst.runs.files import Journal, read_journal
    from mst.runs.graded import graded_session
    from mst.runs.layout import RUN_SCHEMA, RunPaths, create_run_dir, resolve_run_dir
    from mst.runs.progress import Progress, Silent
    from mst.runs.run import Run, open_run
    from mst.runs.summary import finalize

_EXPORTS = {
    "Journal": "mst.runs.files",
    "read_journal": "mst.runs.files",
    "graded_session": "mst.runs.graded",
    "RUN_SCHEMA": "mst.runs.layout",
    "RunPaths": "mst.runs.layout",
    "create_run_dir": "mst.runs.layout",
    "resolve_run_dir": "mst.runs.layout",
    "Progress": "mst.runs.progress",
    "Silent": "mst.runs.progress",
    "Run": "mst.runs.run",
    "open_run": "mst.runs.run",
    "finalize": "mst.runs.summary",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "RUN_SCHEMA",
    "Journal",
    "Progress",
    "Run",
    "RunPaths",
    "Silent",
    "create_run_dir",
    "finalize",
    "graded_session",
    "open_run",
    "read_journal",
    "resolve_run_dir",
]
