"""LLM judge overhead per verdict, and throughput at a provider latency of 200 ms.

1. **Overhead per verdict** (budget ≤ 2 ms, excluding provider latency): CPU time (user+sys) of
   this process per verdict, graded one after another through ``LiveSource().judge`` — building
   the prompt, the hop to the judges' event loop, the provider adapter, parsing the verdict and
   the usage record. Measured with the ``mock`` model (no HTTP: mst's own cost alone) and with
   ``openai:`` through the real SDK against the fake provider in a *separate process* (so its
   CPU is not counted), where the figure also holds the SDK and the HTTP client; the floor there
   (one bare ``httpx2`` POST of a same-sized body) is the cost of reaching a model at all.
2. **Throughput**: 1,000 verdicts, each call answered after 200 ms, graded 16 at a time by the
   grading phase's own scheduler (``gradingConcurrency: 16``). The ideal is 1000 / 16 × 0.2 s =
   12.5 s; the budget is 110 % of it.

    .venv/bin/python bench/bench_llm_judges.py [--verdicts 1000] [--overhead 300]

Figures: ``bench/llm_judges.md``.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "clients_real"))
sys.path.insert(0, str(ROOT))

from fake_provider import FakeProvider, slow, tool  # noqa: E402

from mst.config.models import JudgeConfig  # noqa: E402
from mst.config.resolved import ResolvedJudge  # noqa: E402
from mst.grading.judges import CaseView, TrialView, resolve_judge  # noqa: E402
from mst.grading.phase import _in_order  # noqa: E402  (the grading phase's scheduler itself)
from mst.grading.sources import LiveSource  # noqa: E402

VERDICT = tool("submit_verdict", {"passed": True, "reason": "states the price"})
CASE = CaseView("c1", "How much does the claw hammer cost?", "18.99", {"sku": "HAM-001"}, 1)


def _serve(latency: float, port_out: multiprocessing.connection.Connection) -> None:
    fake = FakeProvider()
    fake.script("fast", [VERDICT])
    fake.script("slow", [slow(latency, VERDICT)])
    fake.start()
    port_out.send(fake.port)
    while True:
        time.sleep(3600)


def _judge(model: str, base_url: str | None = None, mock: dict[str, Any] | None = None) -> ResolvedJudge:
    llm: dict[str, Any] = {"model": model, "rubric": "The answer states the price.", "sees": ["prompt", "answer",
                                                                                            "expected"]}
    if base_url:
        llm["baseUrl"] = base_url
    if mock:
        llm["mock"] = mock
    return resolve_judge(JudgeConfig.model_validate({"id": "bench", "llm": llm}), Path("."))


def _trial(i: int) -> TrialView:
    return TrialView(variant="v", case_id="c1", trial=i, answer="The claw hammer costs 18.99.",
                     ending={"kind": "trial"}, transcript=None, expected="18.99", prompt=CASE.prompt)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def overhead(judge: ResolvedJudge, n: int) -> float:
    """CPU ms per verdict, graded one at a time (after a warm-up)."""
    source = LiveSource()
    for i in range(20):
        assert source.judge(judge, _trial(i), CASE).verdict is not None
    start = _cpu()
    for i in range(n):
        outcome = source.judge(judge, _trial(i), CASE)
        assert outcome.verdict is not None, outcome.error
    return (_cpu() - start) * 1000 / n


def floor(base_url: str, n: int) -> float:
    """CPU ms of one bare POST of a judge-sized body and reading the reply: reaching a model at all."""
    import httpx2

    body = {"model": "fast", "messages": [{"role": "user", "content": "x" * 700}], "tools": [{}]}
    with httpx2.Client() as client:
        for _ in range(20):
            client.post(f"{base_url}/chat/completions", json=body).read()
        start = _cpu()
        for _ in range(n):
            client.post(f"{base_url}/chat/completions", json=body).read()
    return (_cpu() - start) * 1000 / n


def throughput(judge: ResolvedJudge, verdicts: int, concurrency: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to grade ``verdicts`` trials ``concurrency`` at a time."""
    source = LiveSource()
    jobs = ((i, functools.partial(source.judge, judge, _trial(i), CASE)) for i in range(verdicts))
    wall, cpu = time.perf_counter(), _cpu()
    results = [outcome for _, outcome in _in_order(jobs, concurrency)]
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    assert all(r.verdict is not None for r in results), next(r.error for r in results if r.verdict is None)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--verdicts", type=int, default=1000)
    parser.add_argument("--overhead", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=_serve, args=(args.latency, theirs), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ours.recv()}/v1"
    try:
        mock_cpu = overhead(_judge("mock"), args.overhead)
        http_cpu = overhead(_judge("openai:fast", url), args.overhead)
        bare = floor(url, args.overhead)
        print(f"overhead per verdict (CPU, one at a time, n={args.overhead}):")
        print(f"  mock model (mst alone):          {mock_cpu:.3f} ms")
        print(f"  openai SDK over HTTP:            {http_cpu:.3f} ms  (bare POST floor {bare:.3f} ms, "
              f"overhead {http_cpu - bare:.3f} ms)")
        ideal = args.verdicts / args.concurrency * args.latency
        for name, judge in (("mock, latencyMs 200", _judge("mock", mock={
                                "latencyMs": args.latency * 1000,
                                "answer": '{"passed": true, "reason": "states {expected}"}'})),
                            ("openai SDK over HTTP, 200 ms", _judge("openai:slow", url))):
            wall, cpu = throughput(judge, args.verdicts, args.concurrency)
            print(f"throughput {name}: {args.verdicts} verdicts at concurrency {args.concurrency}: "
                  f"{wall:.2f} s wall ({100 * wall / ideal:.1f}% of ideal {ideal:.2f} s), {cpu:.2f} s CPU")
    finally:
        server.kill()


if __name__ == "__main__":
    main()
