"""Uploading a run directory to a result store (docs/result-store.md, "Uploading").

Order is the contract: every object first, then ``runs/<id>/manifest.json``, then the store's
``latest.json``. An upload killed midway leaves objects and no manifest: the run is incomplete,
nothing reads it as a run, and uploading again finishes it, skipping the objects already there
with the right size and hash. Re-uploading a run that has a manifest (it was resumed, or graded
again in place) removes the old manifest first, so the run is never complete with stale objects.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mst.store.backend import Store, store_errors
from mst.store.manifest import MANIFEST, Manifest, StoredFile, StoredObject, run_head
from mst.store.packs import PACK_BYTES, PackWriter, sha256_hex

JOBS = 16  # objects in flight at once: enough to hide an object store's latency, bounded for memory
REFERABLE = ("transcripts", "artifacts")  # what a regrade shares with its source run (hard links locally)


@dataclass
class UploadReport:
    url: str  # the stored run's URL
    uploaded: int = 0
    skipped: int = 0  # already in the store with the right size and hash
    referred: int = 0  # files a regrade refers to in its source run instead of copying
    bytes: int = 0


def upload_run(run_dir: Path, store: Store, *, jobs: int = JOBS, pack_bytes: int | None = None) -> UploadReport:
    """Upload ``run_dir`` (a finished run directory) to ``store``; return what was done."""
    head = run_head(run_dir)
    run_id = run_dir.name
    report = UploadReport(store.url_of("runs", run_id))
    with store_errors(store.url):
        existing = _listing(store, run_id)
        if MANIFEST in existing:
            store.fs.rm_file(store.run_path(run_id, MANIFEST))
        refs = _referable(store, head.regradeOf) if head.regradeOf else {}
        with _Uploader(store, run_id, existing, jobs, report) as uploader:
            files = list(_put_files(run_dir, uploader, refs, pack_bytes or _pack_bytes(), report))
        manifest = Manifest(run=head, objects=uploader.objects, files=files)
        store.fs.pipe_file(store.run_path(run_id, MANIFEST), manifest.to_bytes())
        store.fs.pipe_file(store.path("latest.json"),
                           orjson.dumps({"run": run_id, "url": report.url}, option=orjson.OPT_INDENT_2))
    return report


def _pack_bytes() -> int:
    """MST_STORE_PACK_BYTES tunes the pack size (docs/result-store.md); the default suits object stores."""
    value = os.environ.get("MST_STORE_PACK_BYTES", "")
    return int(value) if value.isdigit() and int(value) > 0 else PACK_BYTES


def _put_files(run_dir: Path, uploader: _Uploader, refs: dict[str, StoredFile], pack_bytes: int,
               report: UploadReport) -> Iterator[StoredFile]:
    """Top-level files as objects of their own (readable in the bucket); each subdirectory's
    files in packs of that subdirectory, a file whose bytes are already packed once referring to
    them (a regrade's transcripts and artifacts, when its source run in the store has the same
    bytes, as references to the source's packs instead)."""
    root = os.fspath(run_dir)
    groups: list[str] = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue  # a crash's temporary files (docs/run-directory.md)
        if entry.is_dir(follow_symlinks=False):
            groups.append(entry.name)
        elif entry.is_file(follow_symlinks=False):
            data = _read(entry.path)
            stored = uploader.put(entry.name, data)
            yield StoredFile(path=entry.name, size=stored.size, sha256=stored.sha256, object=entry.name)
    packed: dict[str, StoredFile] = {}  # sha256 → where those bytes already are in this run's packs
    for group in groups:
        writer = PackWriter(group, pack_bytes)
        for rel in _walk(root, group):
            data = _read(f"{root}/{rel}")
            sha = sha256_hex(data)
            ref = refs.get(rel) if group in REFERABLE else None
            if ref is not None and ref.size == len(data) and ref.sha256 == sha:
                report.referred += 1
                yield ref
                continue
            same = packed.get(sha)
            if same is not None and same.size == len(data):  # files of the same bytes (artifacts): stored once
                yield same.model_copy(update={"path": rel})
                continue
            member, pack = writer.add(rel, data, sha)
            packed[sha] = placed = StoredFile(path=rel, size=member.size, sha256=sha, object=member.key,
                                              offset=member.offset)
            yield placed
            if pack is not None:
                uploader.put(pack.key, pack.data)
        last = writer.close()
        if last is not None:
            uploader.put(last.key, last.data)


def _walk(root: str, group: str) -> Iterator[str]:
    """Files under ``group``, relative to the run, in a fixed order (packs come out the same)."""
    for folder, dirs, names in os.walk(f"{root}/{group}"):
        dirs.sort()
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        for name in sorted(names):
            if not name.startswith("."):
                yield f"{rel}/{name}"


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _listing(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    """What the store holds of this run already: key (relative to the run) → the backend's info."""
    prefix = store.run_path(run_id)
    store.fs.invalidate_cache()  # what is there now, not what an earlier listing saw
    if not store.fs.exists(prefix):
        return {}
    found = store.fs.find(prefix, detail=True)
    return {os.path.relpath(path, prefix).replace(os.sep, "/"): info for path, info in found.items()}


def _referable(store: Store, source_id: str) -> dict[str, StoredFile]:
    """The source run's stored transcripts and artifacts, by path, as references from a regrade;
    none when the source is not (completely) in the store: then the regrade stores its own copy."""
    from mst.store.fetch import read_manifest

    if not store.fs.exists(store.run_path(source_id, MANIFEST)):
        return {}
    source = read_manifest(store, source_id)
    return {f.path: f.model_copy(update={"run": f.run or source_id}) for f in source.files
            if f.path.split("/", 1)[0] in REFERABLE}


@dataclass
class _Uploader:
    """Puts objects from a bounded pool of threads; an object already stored with the same bytes
    is skipped. The first failure is raised when the pool is closed."""

    store: Store
    run_id: str
    existing: dict[str, dict[str, Any]]
    jobs: int
    report: UploadReport
    objects: list[StoredObject] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None
    _slots: threading.BoundedSemaphore | None = None
    _futures: list[Future[None]] = field(default_factory=list)

    def __enter__(self) -> _Uploader:
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="mst-upload")
        self._slots = threading.BoundedSemaphore(self.jobs * 2)  # memory: at most 2 × jobs objects held
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._pool is not None
        self._pool.shutdown(wait=True)
        if exc[0] is None:
            for future in self._futures:
                future.result()

    def put(self, key: str, data: bytes) -> StoredObject:
        assert self._pool is not None and self._slots is not None
        stored = StoredObject(key=key, size=len(data), sha256=sha256_hex(data))
        self.objects.append(stored)
        if _same(self.store, self.existing.get(key), data, stored.sha256, self.store.run_path(self.run_id, key)):
            self.report.skipped += 1
            return stored
        self._slots.acquire()
        self._futures.append(self._pool.submit(self._send, key, data))
        self._futures = [f for f in self._futures if not f.done() or f.exception() is not None]
        for future in self._futures:
            if future.done():
                future.result()  # an object failed: stop now, not after building every pack
        self.report.uploaded += 1
        self.report.bytes += len(data)
        return stored

    def _send(self, key: str, data: bytes) -> None:
        assert self._slots is not None
        try:
            self.store.fs.pipe_file(self.store.run_path(self.run_id, key), data)
        finally:
            self._slots.release()


def _same(store: Store, info: dict[str, Any] | None, data: bytes, sha256: str, path: str) -> bool:
    """Whether a stored object already holds ``data``: the size, then the hash the backend keeps
    (S3's ETag of a single-part upload and GCS's md5Hash are the MD5; a local file is read)."""
    if info is None or int(info.get("size") or -1) != len(data):
        return False
    def md5() -> str:  # computed only when a stored object has the same size
        return hashlib.md5(data, usedforsecurity=False).hexdigest()

    if info.get("md5Hash"):
        return bool(base64.b64decode(info["md5Hash"]).hex() == md5())
    etag = str(info.get("ETag") or "").strip('"')
    if etag and "-" not in etag:
        return etag == md5()
    if store.scheme == "file":
        return bool(sha256_hex(store.fs.cat_file(path)) == sha256)
    return False
