"""Fetching a stored run into a local runs directory (docs/result-store.md, "Fetching").

Only a run with a manifest is a run. Every object is checked against the manifest's size and
SHA-256 before it is used, and every file cut from a pack against its own: a mismatch or a
missing object names the object's URL and stops, and nothing is left behind. A regrade's
references are followed into its source run, checked against the source's manifest. The run is
assembled in a hidden staging directory and renamed into place, so a run directory appears
whole or not at all (docs/run-directory.md).
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from mst.errors import Problem, UserError
from mst.runs.debris import new_locked_dir, staging_name
from mst.store.backend import Store, store_errors
from mst.store.manifest import MANIFEST, Manifest, StoredFile, StoredObject
from mst.store.packs import sha256_hex
from mst.store.upload import JOBS

Source = tuple[str, str]  # (run id, object key relative to that run)


def read_manifest(store: Store, run_id: str) -> Manifest:
    url = store.url_of("runs", run_id, MANIFEST)
    with store_errors(store.url):
        try:
            data = store.fs.cat_file(store.run_path(run_id, MANIFEST))
        except FileNotFoundError:
            raise UserError(Problem(store.url_of("runs", run_id), "no manifest: the run is not in this store, or "
                                    "its upload did not finish (upload it again to finish it)")) from None
    return Manifest.parse(data, url)


def fetch_run(store: Store, run_id: str, runs_dir: Path, *, jobs: int = JOBS) -> Path:
    """``runs_dir/<run_id>``, fetched from ``store`` unless it is there already."""
    target = runs_dir / run_id
    if (target / "run.json").is_file():
        return target
    manifest = read_manifest(store, run_id)
    expected = _expected(store, run_id, manifest)
    runs_dir.mkdir(parents=True, exist_ok=True)
    staging = runs_dir / staging_name(run_id)
    fd = new_locked_dir(staging)
    try:
        by_object: dict[Source, list[StoredFile]] = defaultdict(list)
        for f in manifest.files:
            by_object[(f.run or run_id, f.object)].append(f)
        for source, data in _download(store, list(by_object), expected, jobs):
            for f in by_object[source]:
                _write(store.url_of("runs", *source), staging, f, data)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return target


def _expected(store: Store, run_id: str, manifest: Manifest) -> dict[Source, StoredObject]:
    """Every object the files name, with the size and hash its own run's manifest gives it."""
    manifests = {run_id: manifest}
    for f in manifest.files:
        if f.run and f.run not in manifests:
            manifests[f.run] = read_manifest(store, f.run)
    expected = {(rid, o.key): o for rid, m in manifests.items() for o in m.objects}
    for f in manifest.files:
        if (f.run or run_id, f.object) not in expected:
            raise UserError(Problem(store.url_of("runs", run_id, MANIFEST),
                                    f"{f.path} is in {f.object}, which no manifest lists"))
    return expected


def _download(store: Store, sources: list[Source], expected: dict[Source, StoredObject], jobs: int
              ) -> Iterator[tuple[Source, bytes]]:
    """Each object's bytes, checked, ``jobs`` at a time (the backend fetches a batch in parallel)."""
    for start in range(0, len(sources), jobs):
        batch = sources[start:start + jobs]
        paths = [store.run_path(rid, key) for rid, key in batch]
        with store_errors(store.url):
            got = store.fs.cat(paths, on_error="return")
        for source, path in zip(batch, paths, strict=True):
            data = got.get(path) if isinstance(got, dict) else got
            yield source, _checked(store, source, data, expected[source])


def _checked(store: Store, source: Source, data: object, want: StoredObject) -> bytes:
    url = store.url_of("runs", *source)
    if isinstance(data, FileNotFoundError) or data is None:
        raise UserError(Problem(url, "missing from the store: the stored run is damaged"))
    if isinstance(data, BaseException):
        from mst.store.backend import describe

        raise UserError(Problem(url, describe(data)))
    assert isinstance(data, bytes)
    if len(data) != want.size or sha256_hex(data) != want.sha256:
        raise UserError(Problem(url, f"does not match the manifest ({len(data)} bytes, expected {want.size}; "
                                "SHA-256 differs): the stored run was changed or damaged"))
    return data


def _write(url: str, staging: Path, f: StoredFile, data: bytes) -> None:
    body = data if f.offset is None else data[f.offset:f.offset + f.size]
    if len(body) != f.size or sha256_hex(body) != f.sha256:
        raise UserError(Problem(url, f"{f.path} does not match the manifest"))
    if f.path.startswith("/") or ".." in f.path.split("/"):
        raise UserError(Problem(url, f"the manifest names a path outside the run: {f.path}"))
    dest = staging / f.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(body)
