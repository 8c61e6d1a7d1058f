"""Where things live in a run directory (docs/run-directory.md)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mst.fileio import atomic_write_json, read_json
from mst.runs.debris import RunLock, new_locked_dir, staging_name

RUN_SCHEMA = "mst.run/v1"
RESULTS_SCHEMA = "mst.results/v1"
SUMMARY_SCHEMA = "mst.summary/v1"
COMPARISONS_SCHEMA = "mst.comparisons/v1"

Key = tuple[str, str, int]  # (variant, case, trial)


def key_of(record: dict[str, object]) -> Key:
    return (str(record["variant"]), str(record["case"]), int(record["trial"]))  # type: ignore[call-overload]


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def attempts(self) -> Path:
        return self.root / "attempts.jsonl"

    @property
    def grading_journal(self) -> Path:
        return self.root / "grading.jsonl"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def comparisons(self) -> Path:
        return self.root / "comparisons.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @staticmethod
    def transcript_rel(variant: str, case: str, trial: int) -> str:
        return f"transcripts/{variant}/{case}/{trial}.jsonl"

    @staticmethod
    def artifacts_rel(variant: str, case: str, trial: int) -> str:
        return f"artifacts/{variant}/{case}/{trial}"

    @staticmethod
    def graders_rel(variant: str, case: str, trial: int) -> str:
        """A trial's grader events in runs an older mst wrote (docs/run-directory.md); grading now
        writes none, only the run's :meth:`grader_manifest_rel`."""
        return f"graders/{variant}/{case}/{trial}.jsonl"

    @staticmethod
    def grader_manifest_rel(digest: str) -> str:
        """The graders' manifest of one configuration, which trials' grading records name."""
        return f"graders/manifest-{digest}.json"

    @staticmethod
    def judge_stream_rel(judge: str, variant: str, case: str, name: str) -> str:
        """A judge's own event stream (docs/run-directory.md): ``name`` is the trial, or for a
        pairwise judge ``<trial>.ab`` / ``<trial>.ba`` (``variant`` is then the candidate)."""
        return f"judges/{judge}/{variant}/{case}/{name}.jsonl"


def new_run_id(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:40] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{slug}-{secrets.token_hex(2)}"


def create_run_dir(runs_dir: Path, name: str, populate: Callable[[RunPaths, str], None]
                   ) -> tuple[RunPaths, RunLock]:
    """Make a new run directory that appears whole or not at all, and hold its lock.

    ``populate(staging, run_id)`` fills a hidden staging directory (run.json at least); only then
    is it renamed to its final name, so a crash never leaves a run directory without a run.json
    that `--resume` could not read. The staging directory is locked from the moment it exists
    and carries this process's pid (:mod:`mst.runs.debris`): a crash leaves it for the next
    sweep, and a failure removes it at once. The lock stays with the directory once renamed.
    """
    runs_dir.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = new_run_id(name)
        final = runs_dir / run_id
        staging = runs_dir / staging_name(run_id)
        if final.exists():
            continue
        try:
            fd = new_locked_dir(staging)
        except FileExistsError:
            continue
        try:
            populate(RunPaths(staging), run_id)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            os.close(fd)
            raise
        return RunPaths(final), RunLock(fd)


def write_latest(run: RunPaths) -> None:
    atomic_write_json(run.root.parent / "latest.json", {"run": run.root.name, "path": str(run.root)})


def resolve_run_dir(arg: Path) -> Path:
    """A run directory given directly, or `runs` / `runs/latest` meaning the newest run."""
    if arg.name == "latest" and not arg.exists():
        arg = arg.parent
    if (arg / "latest.json").is_file() and not (arg / "run.json").exists():
        latest = read_json(arg / "latest.json", "latest.json")
        return arg / str(latest.get("run", ""))
    return arg


def link_file(src: str, dst: str) -> None:
    """Reference a source run's file from a regrade: a hard link, or a copy across devices.

    String paths and a make-directory only on a miss: a regrade links one file per trial.
    """
    try:
        os.link(src, dst)
        return
    except FileExistsError:
        return
    except FileNotFoundError:
        if not os.path.exists(src):
            raise
        os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
    except FileExistsError:
        pass
    except OSError:
        shutil.copy2(src, dst)


def link_tree(src: str, dst: str) -> None:
    """Hard-link every file under ``src`` (a trial's artifacts) into ``dst``."""
    for folder, _, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(folder, src))
        for name in files:
            link_file(os.path.join(folder, name), os.path.join(target, name))


def link_attempt_files(src_root: Path, dst_root: Path, transcript: str | None, artifacts: str | None) -> bool:
    """Reference an attempt's transcript and artifacts (paths relative to the run) from another
    run directory (a regrade, a grade bundle) by hard link, never by copy. False when the record
    names a transcript that is no longer on disk (its evidence is lost)."""
    src, dst = os.fspath(src_root), os.fspath(dst_root)
    found = True
    if transcript:
        try:
            link_file(f"{src}/{transcript}", f"{dst}/{transcript}")
        except FileNotFoundError:  # the attempt's transcript is gone: its grading will say so
            found = False
    if artifacts and os.path.isdir(f"{src}/{artifacts}"):
        link_tree(f"{src}/{artifacts}", f"{dst}/{artifacts}")
    return found
