"""The runs a runs directory or a result store holds, for `mst runs list` (docs/result-store.md)."""

from __future__ import annotations

from pathlib import Path

from mst.store.backend import Store, store_errors
from mst.store.manifest import MANIFEST, Manifest, RunHead, run_head


def local_runs(runs_dir: Path) -> list[RunHead]:
    """Every run directory (one with a run.json) under ``runs_dir``, oldest first."""
    if not runs_dir.is_dir():
        return []
    heads = [run_head(p) for p in runs_dir.iterdir()
             if not p.name.startswith(".") and (p / "run.json").is_file()]
    return sorted(heads, key=_order)


def stored_runs(store: Store) -> list[RunHead]:
    """Every complete run in ``store`` (one with a manifest: an unfinished upload is no run)."""
    with store_errors(store.url):
        store.fs.invalidate_cache()  # a listing is read fresh: another process may have uploaded since
        paths = store.fs.glob(store.run_path("*", MANIFEST))
        found = store.fs.cat(paths) if paths else {}
    if isinstance(found, bytes):
        found = {paths[0]: found}
    heads = [Manifest.parse(data, f"{store.url.rstrip('/')}/{path}").run for path, data in found.items()]
    return sorted(heads, key=_order)


def _order(head: RunHead) -> tuple[str, str]:
    return (head.createdAt or "", head.id)


def stored_run_ids(store: Store, ids: list[str]) -> set[str]:
    """Which of ``ids`` are complete runs in ``store`` (their manifest is there)."""
    with store_errors(store.url):
        store.fs.invalidate_cache()
        return {i for i in ids if store.fs.exists(store.run_path(i, MANIFEST))}
