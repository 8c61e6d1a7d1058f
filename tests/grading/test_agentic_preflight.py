"""The judge preflight and judge access for agentic judges: a missing CLI or key is named before
any verdict; each CLI run holds a slot of its runtime's provider and gets its keys through the
grading's access (docs/grading.md, "Preflight", "Judge access")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import basic_eval, mock_variant, run_cli, write_eval

from mst.config.judge_agentic import AgenticJudgeConfig
from mst.config.judge_limits import JudgeLimit
from mst.config.resolved import ResolvedJudge
from mst.grading import agentic_judge
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess, LocalLeases
from mst.grading.preflight import Keys, check


def _judge(secrets: tuple[str, ...] = (), **settings: Any) -> ResolvedJudge:
    options = AgenticJudgeConfig.model_validate({"runtime": "codex", "rubric": "Fixed?", **settings})
    return ResolvedJudge(id="review", target="codex", source="agentic", options=options.model_dump(mode="json"),
                         threshold=0.5, version="codex-cli 0.0", identity="sha256:x", secrets=secrets)


def test_a_missing_cli_is_named_by_the_preflight() -> None:
    (missing,) = check([_judge(command=["mst-no-such-cli", "exec"])], Keys(lambda name: True, "x"), None)
    assert str(missing) == ("judge 'review': the program 'mst-no-such-cli' is not on PATH; install it on this "
                            "machine (for shards: in the worker image)")


@pytest.mark.slow
def test_a_cli_that_reports_its_version_passes(tmp_path: Path) -> None:
    from tests.realtools import tool

    assert check([_judge(command=[str(tool("codex"))])], Keys(lambda name: True, "x"), None) == []


def test_its_key_must_be_in_the_secrets_file_for_shards() -> None:
    missing = check([_judge(("OPENAI_API_KEY",), command=["mst-no-such-cli"])],
                    Keys(lambda name: False, "the secrets file"), None, keys_only=True)
    assert [str(m) for m in missing] == ["judge 'review': the key OPENAI_API_KEY is not in the secrets file; "
                                         "add OPENAI_API_KEY=... to the secrets file"]


def test_a_missing_cli_stops_a_run_before_anything_is_collected(tmp_path: Path) -> None:
    doc = basic_eval(trials=1, cases=[{"id": "c0", "prompt": "say 0", "expected": "0"}],
                     variants=[mock_variant("base")],
                     judges=[{"id": "review", "agentic": {"runtime": "claude-code", "rubric": "Right?",
                                                          "command": ["mst-no-such-cli"]}}])
    path = write_eval(tmp_path, doc)
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "review" in said and "install the claude-code CLI" in said
    assert not (tmp_path / "runs").exists() or not any(p.is_dir() for p in (tmp_path / "runs").iterdir())


class _Token:
    def current(self) -> str:
        return "tok-fresh"


def test_a_cli_run_gets_its_keys_and_the_gateway_token_through_access() -> None:
    judge = _judge(("OPENAI_API_KEY",))
    access = JudgeAccess(secrets={"OPENAI_API_KEY": "sk-1"}, token=_Token())
    assert agentic_judge.keys(judge, access) == {"OPENAI_API_KEY": "sk-1", AUTH_TOKEN: "tok-fresh"}
    assert agentic_judge.keys(judge, JudgeAccess(secrets={"OPENAI_API_KEY": "sk-1"})) == {"OPENAI_API_KEY": "sk-1"}


def test_each_cli_run_holds_a_slot_of_its_runtimes_provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mst.endings import COMPLETED

    active = {"now": 0, "most": 0}
    seen: list[dict[str, str]] = []

    async def fake_runner(cfg: Any, root: Path, prompt: str, schema: Any, secrets: dict[str, str],
                          rec: Any) -> tuple[Any, Any, dict[str, Any]]:
        seen.append(dict(secrets))
        active["now"] += 1
        active["most"] = max(active["most"], active["now"])
        await asyncio.sleep(0.05)
        active["now"] -= 1
        return COMPLETED, {"passed": True, "reason": "ok"}, {}

    monkeypatch.setattr(agentic_judge, "_run_codex", fake_runner)  # the CLI itself is tested with the real one
    access = JudgeAccess(LocalLeases({"openai": JudgeLimit(concurrency=2)}), {"OPENAI_API_KEY": "sk-2"})
    judge = _judge(("OPENAI_API_KEY",))
    cfg = agentic_judge.settings(judge)

    async def many() -> None:
        await asyncio.gather(*(agentic_judge.run_judge(judge, cfg, tmp_path, "p", {}, access) for _ in range(6)))

    asyncio.run(many())
    assert active["most"] == 2  # six runs at once, never more than the cap of `openai`
    assert seen == [{"OPENAI_API_KEY": "sk-2"}] * 6
