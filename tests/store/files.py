"""Comparing run directories file by file (a fetched run must equal the one uploaded)."""

from __future__ import annotations

from pathlib import Path


def run_files(root: Path) -> dict[str, bytes]:
    """Every file of a run directory but the hidden ones (a crash's temporary files, shared link sources)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}
