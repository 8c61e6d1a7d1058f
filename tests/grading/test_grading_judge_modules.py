"""Two evals' judge modules of the same name never answer for each other in one process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mst.config.models import JudgeConfig
from mst.grading.judges import load_callable, resolve_judge


def test_same_module_name_from_two_eval_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "samename_judges", raising=False)
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, verdict in ((first, "True"), (second, "False")):
        folder.mkdir()
        (folder / "samename_judges.py").write_text(f"def j(trial):\n    return {verdict}\n")
    cfg = JudgeConfig(id="j", code="samename_judges:j")
    a = resolve_judge(cfg, first)
    b = resolve_judge(cfg, second)
    assert a.identity != b.identity  # different source files, different identities
    assert load_callable(a, first)(None) is True
    assert load_callable(b, second)(None) is False
    sys.modules.pop("samename_judges", None)
