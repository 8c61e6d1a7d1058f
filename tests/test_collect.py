"""The collector's record of an attempt's artifacts: looked for only where a client could have
written them (mst.collect, docs/run-directory.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.helpers import basic_eval, write_eval

from mst.clients.base import AttemptOutcome, AttemptRequest
from mst.collect import AttemptSpec, Collector
from mst.config.resolve import resolve_eval
from mst.endings import COMPLETED
from mst.session.redact import Redactor


class _Client:
    """Writes a file under its artifacts folder when ``write``; never reads the folder otherwise."""

    def __init__(self, write: bool) -> None:
        self.write = write

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        if self.write:
            request.artifacts_dir.mkdir(parents=True)
            (request.artifacts_dir / "out.txt").write_text("x")
        return AttemptOutcome(COMPLETED, "42")

    async def aclose(self) -> None:
        return None


def _collect(tmp_path: Path, write: bool) -> dict[str, Any]:
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(trials=1)))
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=lambda r: None)
    variant = resolved.variants[0]
    collector._clients[variant.id] = _Client(write)  # type: ignore[assignment]
    return asyncio.run(collector.attempt(AttemptSpec(variant, resolved.cases[0], 0)))


def test_a_client_that_wrote_artifacts_has_them_recorded(tmp_path: Path) -> None:
    record = _collect(tmp_path, write=True)
    assert record["artifacts"] == "artifacts/base/c1/0"
    assert (tmp_path / "run" / record["artifacts"] / "out.txt").read_text() == "x"


def test_a_client_that_never_read_its_artifacts_folder_has_none(tmp_path: Path) -> None:
    record = _collect(tmp_path, write=False)
    assert record["artifacts"] is None and not (tmp_path / "run" / "artifacts").exists()
    assert (tmp_path / "run" / record["transcript"]).is_file()
