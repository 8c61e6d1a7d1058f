"""The result store: runs uploaded to file://, s3:// or gs:// through fsspec, with a manifest
written last; fetched back and checked; listed (docs/result-store.md). Names are imported on
first use, so importing mst does not import fsspec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mst._lazy import lazy_exports

if TYPE_CHECKING:
    from mst.store.backend import Store, open_store, split_run_url
    from mst.store.fetch import fetch_run, read_manifest
    from mst.store.listing import local_runs, stored_run_ids, stored_runs
    from mst.store.manifest import Manifest, RunHead
    from mst.store.upload import UploadReport, upload_run

_EXPORTS = {
    "Store": "mst.store.backend",
    "open_store": "mst.store.backend",
    "split_run_url": "mst.store.backend",
    "fetch_run": "mst.store.fetch",
    "read_manifest": "mst.store.fetch",
    "local_runs": "mst.store.listing",
    "stored_runs": "mst.store.listing",
    "stored_run_ids": "mst.store.listing",
    "Manifest": "mst.store.manifest",
    "RunHead": "mst.store.manifest",
    "UploadReport": "mst.store.upload",
    "upload_run": "mst.store.upload",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["Manifest", "RunHead", "Store", "UploadReport", "fetch_run", "local_runs", "open_store",
           "read_manifest", "split_run_url", "stored_run_ids", "stored_runs", "upload_run"]
