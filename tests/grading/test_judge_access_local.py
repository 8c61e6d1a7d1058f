"""`mst grade` on this machine: the same caps and the same gateway token, without the wire."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import load, run_cli
from tests.runners.judge_gateway import Gateway, auth_command, gateway_eval, serve
from tests.runners.runners_helpers import canary_free, collected_run, new_run

pytestmark = pytest.mark.slow


def test_local_grading_holds_the_cap_and_refreshes_the_token(tmp_path: Path) -> None:
    with serve(Gateway(delay=0.5, ttl=2.5, auth=True)) as gateway:
        path = gateway_eval(tmp_path, gateway, cases=4, auth=True, limits={"gw": {"concurrency": 2}},
                            gradingConcurrency=8)
        run = collected_run(tmp_path, path)
        before = {p for p in run.parent.iterdir() if p.is_dir()}
        proc = run_cli("grade", str(run), cwd=tmp_path, env={"MST_LLM_AUTH_COMMAND": auth_command(gateway)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert gateway.max_active == 2 and len(gateway.starts) == 16
        assert gateway.refused == []
        # The preflight's, the first, and at least one more: 16 calls, two at a time, 0.5 s each
        # take 4 s, longer than a token lasts.
        assert len(gateway.tokens) >= 3
        regrade = new_run(run.parent, before)
        reasons = {v["reason"] for t in load(regrade / "results.json")["trials"] for v in t["verdicts"]
                   if v["judge"] == "gw"}
        assert reasons == {"called with [REDACTED]"}
        # Locally the judge's own print reaches the terminal as the judge wrote it; mst's output does not.
        said = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                         if not line.startswith("judge used token="))
        for token in gateway.tokens:
            assert canary_free([tmp_path / "runs"], token) == []
            assert token not in said


def test_a_failing_auth_command_stops_grading_before_any_shard_or_regrade(tmp_path: Path) -> None:
    with serve(Gateway()) as gateway:
        run = collected_run(tmp_path, gateway_eval(tmp_path, gateway, cases=2))
        count = len(list(run.parent.iterdir()))  # no regrade is made
        proc = run_cli("grade", str(run), "--runner", "process", cwd=tmp_path,
                       env={"MST_LLM_AUTH_COMMAND": "mst-no-such-auth-command"})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "MST_LLM_AUTH_COMMAND" in proc.stderr and "not found on PATH" in proc.stderr
        assert gateway.starts == []
        assert len(list(run.parent.iterdir())) == count
