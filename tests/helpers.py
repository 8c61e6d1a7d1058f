"""Shared fixtures: small evals written into the test's own directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def write_eval(directory: Path, doc: dict[str, Any], name: str = "eval.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def mock_variant(vid: str, *, baseline: bool = False, **mock: Any) -> dict[str, Any]:
    return {"id": vid, "baseline": baseline, "client": "agent", "model": "mock",
            "settings": {"maxTurns": 4, "mock": mock}}


def basic_eval(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "t",
        "trials": 2,
        "concurrency": 4,
        "deadlineSeconds": 10,
        "cases": [
            {"id": "c1", "prompt": "say 42", "expected": "42"},
            {"id": "c2", "prompt": "say 7", "expected": "7"},
        ],
        "variants": [mock_variant("base", baseline=True), mock_variant("cand")],
        "assertions": [{"type": "equals"}],
    }
    doc.update(overrides)
    return doc


def run_cli(*args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The real `mst` command in a subprocess."""
    full_env = {**os.environ, "COLUMNS": "160", **(env or {})}
    return subprocess.run([sys.executable, "-m", "mst", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def only_run(runs_dir: Path) -> Path:
    runs = [p for p in runs_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


@pytest.fixture
def make_eval(tmp_path: Path) -> Callable[..., Path]:
    def make(**overrides: Any) -> Path:
        return write_eval(tmp_path, basic_eval(**overrides))

    return make
