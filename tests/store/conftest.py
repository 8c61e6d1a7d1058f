"""Fixtures for the result-store tests: a finished run, and the real local servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import basic_eval, only_run, run_cli, write_eval
from tests.store.servers import Server, environ, gcs_emulator, moto_s3


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    """A real run of a small eval (mock model: 2 cases × 2 variants × 2 trials), graded."""
    write_eval(tmp_path, basic_eval())
    done = run_cli("run", "eval.yaml", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return only_run(tmp_path / "runs")


@pytest.fixture
def s3() -> Iterator[Server]:
    with moto_s3() as server, environ(server.env):
        yield server


@pytest.fixture
def gcs() -> Iterator[Server]:
    with gcs_emulator() as server, environ(server.env):
        yield server
