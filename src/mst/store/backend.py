"""Where a result store is: a URL (``file://``, ``s3://bucket/prefix``, ``gs://bucket/prefix``, or
a plain directory) opened through fsspec (docs/result-store.md).

fsspec and its backends are imported only here, and only when a store is used, so ``mst --help``
does not pay for them. Credentials come from each backend's own standard sources (the AWS
environment, profiles and instance roles; Google's application default credentials); mst never
reads, records or passes them on. Every backend error is turned into a :class:`UserError` that
names the URL, so a wrong bucket or a missing login is one clear line and exit 2.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mst.errors import Problem, UserError

SCHEMES = ("file", "s3", "gs")
_EXTRAS = {"s3": ("s3fs", "mst[s3]"), "gs": ("gcsfs", "mst[gcs]")}


@dataclass(frozen=True)
class Store:
    """An opened store: its URL as given, the fsspec filesystem, and the root path inside it."""

    url: str
    fs: Any  # fsspec.AbstractFileSystem (untyped library)
    root: str
    scheme: str

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def url_of(self, *parts: str) -> str:
        return f"{self.url.rstrip('/')}/{'/'.join(parts)}"

    def run_path(self, run_id: str, *parts: str) -> str:
        return self.path("runs", run_id, *parts)


def split_run_url(url: str) -> tuple[str, str] | None:
    """``<store>/runs/<id>`` → (store URL, run id); None for a URL that names no stored run."""
    if "://" not in url:
        return None
    head, sep, run_id = url.rstrip("/").rpartition("/runs/")
    if not sep or not run_id or "/" in run_id:
        return None
    return head, run_id


def resolve_url(url: str, base: Path) -> str:
    """A store URL from an eval file: a relative ``file://`` path is relative to the eval's folder."""
    if url.startswith("file://") and not url[len("file://"):].startswith("/"):
        return f"file://{(base / url[len('file://'):]).resolve()}"
    return url


def open_store(url: str) -> Store:
    """Open ``url`` and check that it can be reached (the bucket exists and we may read it)."""
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    if scheme not in SCHEMES:
        raise UserError(Problem(url, f"not a result store URL: use {', '.join(s + '://' for s in SCHEMES)} "
                                "(docs/result-store.md)"))
    _need_backend(url, scheme)
    import fsspec

    with store_errors(url):
        # A fresh filesystem: fsspec's instance cache would keep an endpoint or login the
        # environment no longer names.
        options: dict[str, Any] = {"auto_mkdir": True} if scheme == "file" else {"skip_instance_cache": True}
        fs, root = fsspec.core.url_to_fs(url, **options)
        store = Store(url, fs, root.rstrip("/") or root, scheme)
        if scheme == "file":
            fs.makedirs(store.root, exist_ok=True)
        else:
            fs.ls(store.root.split("/", 1)[0], refresh=True)  # the bucket: a wrong name or no login fails here
    return store


def _need_backend(url: str, scheme: str) -> None:
    if scheme not in _EXTRAS:
        return
    import importlib.util

    module, extra = _EXTRAS[scheme]
    if importlib.util.find_spec(module) is None:
        raise UserError(Problem(url, f"{scheme}:// stores need the {module} package: pip install '{extra}'"))


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Backend exceptions → one line naming the store URL (exit 2). A UserError passes through."""
    try:
        yield
    except UserError:
        raise
    except Exception as exc:
        raise UserError(Problem(url, describe(exc))) from None


def describe(exc: BaseException) -> str:
    """What went wrong, in words, for the errors stores commonly give (by class name: the backend
    libraries are optional, so their exception classes are not imported)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = str(exc).strip() or type(exc).__name__
    if names & {"NoCredentialsError", "DefaultCredentialsError", "RefreshError", "PartialCredentialsError"}:
        return f"no credentials found for this store ({detail}); mst uses the backend's standard sources"
    if "FileNotFoundError" in names:
        return f"not found (a wrong bucket or prefix?): {detail}"
    if "PermissionError" in names:
        return f"access denied (check the credentials and the bucket's permissions): {detail}"
    return f"{type(exc).__name__}: {detail}"
