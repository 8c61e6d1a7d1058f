"""judgeLimits, 429 holds and the gateway token across the shards of `mst grade --runner process`.

Real processes and real HTTP on 127.0.0.1: the judges call a fake provider through the grading's
judge access, and the provider counts what arrives (tests/runners/judge_gateway.py). Each test runs
with a code judge calling the provider itself and with an LLM judge calling it through the real
``openai`` SDK (a ``baseUrl`` gateway; its provider, for ``judgeLimits``, is ``openai``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers import load
from tests.runners.judge_gateway import Gateway, auth_command, gateway_eval, serve
from tests.runners.runners_helpers import canary_free, collected_run, new_run

pytestmark = pytest.mark.slow

SHARDS = ("--runner", "process", "--runner-option", "shards=3")
KINDS = pytest.mark.parametrize("llm", [False, True], ids=["code", "llm"])


def _provider(llm: bool) -> str:
    return "openai" if llm else "gw"


def _grade(tmp: Path, run: Path, *extra: str, env: dict[str, str] | None = None,
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mst", "grade", str(run), *extra], cwd=tmp, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _verdicts(regrade: Path) -> list[dict[str, object]]:
    return [v for t in load(regrade / "results.json")["trials"] for v in t["verdicts"] if v["judge"] == "gw"]


@KINDS
def test_concurrency_cap_is_never_exceeded_across_three_shards(tmp_path: Path, llm: bool) -> None:
    with serve(Gateway(delay=0.3)) as gateway:
        # Each shard alone would run 8 judges at once: 24 at once without the shared cap.
        path = gateway_eval(tmp_path, gateway, limits={_provider(llm): {"concurrency": 2}}, gradingConcurrency=8,
                            llm=llm)
        run = collected_run(tmp_path, path)
        before = {p for p in run.parent.iterdir() if p.is_dir()}
        proc = _grade(tmp_path, run, *SHARDS)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert len(gateway.starts) == 24  # 6 cases x 2 trials x 2 variants, each called once
        assert gateway.max_active == 2
        regrade = new_run(run.parent, before)
        assert len(load(regrade / "run.json")["grading"]["runner"]["shards"]) == 3
        assert len(_verdicts(regrade)) == 24 and all(v["passed"] for v in _verdicts(regrade))


def test_requests_per_minute_spaces_starts_across_shards(tmp_path: Path) -> None:
    with serve(Gateway(delay=0.0)) as gateway:
        path = gateway_eval(tmp_path, gateway, cases=3, trials=1, limits={"gw": {"requestsPerMinute": 120}},
                            gradingConcurrency=4)
        run = collected_run(tmp_path, path)
        proc = _grade(tmp_path, run, *SHARDS)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        starts = sorted(gateway.starts)
        assert len(starts) == 6
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert min(gaps) >= 0.4, gaps  # 120 a minute: one start every 0.5 s, whichever shard asks


@KINDS
def test_429_retry_after_holds_the_provider_for_every_shard(tmp_path: Path, llm: bool) -> None:
    with serve(Gateway(delay=0.25, fail_first=1, retry_after=1.5)) as gateway:
        path = gateway_eval(tmp_path, gateway, limits={_provider(llm): {"concurrency": 3}}, gradingConcurrency=4,
                            llm=llm)
        run = collected_run(tmp_path, path)
        before = {p for p in run.parent.iterdir() if p.is_dir()}
        proc = _grade(tmp_path, run, *SHARDS)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        ((told, status),) = gateway.refused
        assert status == 429
        # Calls already granted when the 429 came may still arrive for a moment; then none until
        # retry-after has passed, from any shard.
        during = [t - told for t in gateway.starts if told + 0.2 < t < told + 1.45]
        assert during == []
        assert len(gateway.starts) == 25  # 24 calls and the one retried
        assert all(v["passed"] for v in _verdicts(new_run(run.parent, before)))


def _cmdlines_and_environs() -> list[bytes]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                found.append(Path(f"/proc/{pid}/{part}").read_bytes())
            except OSError:
                continue
    return found


@KINDS
def test_expiring_token_is_refreshed_during_a_long_shard_and_never_written(
        tmp_path: Path, request: pytest.FixtureRequest, llm: bool) -> None:
    with serve(Gateway(delay=0.3, ttl=3, auth=True)) as gateway:
        # One call at a time across 2 shards: 24 calls take ~7 s, over two lifetimes of a token.
        # The LLM judge (a baseUrl gateway) sends the token in place of its key.
        path = gateway_eval(tmp_path, gateway, auth=True, limits={_provider(llm): {"concurrency": 1}}, llm=llm)
        run = collected_run(tmp_path, path)
        before = {p for p in run.parent.iterdir() if p.is_dir()}
        proc = subprocess.Popen(
            [sys.executable, "-m", "mst", "grade", str(run), "--runner", "process", "--runner-option", "shards=2",
             "--runner-option", "keep=true"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MST_LLM_AUTH_COMMAND": auth_command(gateway)})
        seen: list[bytes] = []
        while proc.poll() is None:  # every process's argv and environment while the shards run
            seen += _cmdlines_and_environs()
            time.sleep(0.3)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err
        assert [s for _, s in gateway.refused] == []  # no call was refused: no token expired in use
        tokens = list(gateway.tokens)
        assert len(tokens) >= 4  # the preflight's, the first, and made again while the shards ran
        regrade = new_run(run.parent, before)
        workdir = Path(load(regrade / "run.json")["grading"]["runner"]["workDir"])
        request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))
        reasons = {v["reason"] for v in _verdicts(regrade)}
        assert reasons == {"called with [REDACTED]"}  # the judges did read a token, redacted in records
        logs = list(workdir.glob("shard-*/worker.log"))
        assert logs and (llm or all("judge used token=[REDACTED]" in log.read_text() for log in logs))
        for token in tokens:
            assert canary_free([tmp_path / "runs", workdir], token) == []  # run, bundles, results, logs
            assert token not in out + err
            assert not any(token.encode() in data for data in seen)  # no argv, no environment
