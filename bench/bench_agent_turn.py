"""Harness overhead of the ``agent`` client per model turn, against the fake provider over real HTTP.

The fake OpenAI / Anthropic server (``tests/clients_real/fake_provider.py``) runs in a *separate
process*, so the CPU time this process spends per turn is exactly mst's overhead: the agent loop,
the provider adapter, the official SDK building the request and parsing the response (for a
stream, the adapter's own ``orjson`` decoding of the events), the HTTP client, and transcript
events. Model latency (the server) and tool latency (the model's tool calls go to a variant
without MCP servers, answered in-process) are excluded by construction.

Reported per turn: CPU time of this process (everything the client side spends), the floor (CPU
of the bare HTTP exchange — one ``httpx2`` POST of a same-sized body, reading the whole JSON or SSE
response — which is the cost of reaching a model at all, counted with model latency), and the
harness overhead = total − floor: the agent loop, the adapter, the SDK's request and response
handling and the transcript. Budget: overhead ≤ 2 ms per turn.

    .venv/bin/python bench/bench_agent_turn.py [--attempts 200] [--turns 5] [--repeat 3]

Figures and the history of this budget: ``bench/clients.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "clients_real"))
sys.path.insert(0, str(ROOT))

from fake_provider import FakeProvider, text, tool  # noqa: E402

from mst.clients.agent import AgentClient, AgentSettings  # noqa: E402
from mst.clients.base import AttemptRequest, TranscriptRecorder  # noqa: E402
from mst.config.models import VariantConfig  # noqa: E402
from mst.endings import COMPLETED  # noqa: E402


def _serve(turns: int, port_out: multiprocessing.connection.Connection) -> None:
    fake = FakeProvider()
    steps = [tool("lookup", {"sku": "HAM-001", "n": i}) for i in range(turns - 1)] + [text("42 in stock")]
    for model in ("bench", "claude-bench"):
        fake.script(model, steps)
    fake.start()
    port_out.send(fake.port)
    while True:
        time.sleep(3600)


async def _attempts(client: AgentClient, count: int, turns: int, concurrency: int) -> None:
    queue = iter(range(count))

    async def worker() -> None:
        for trial in queue:
            req = AttemptRequest(
                case_id="c1", prompt="How many claw hammers are in stock?", expected="42", metadata={},
                variant=client.variant, trial=trial, try_number=1, seed=0, deadline_s=60,
                artifacts_dir=Path("/nonexistent"), transcript=TranscriptRecorder("agent"),
                secrets={"OPENAI_API_KEY": "sk-bench", "ANTHROPIC_API_KEY": "sk-bench"},
            )
            outcome = await client.attempt(req)
            assert outcome.ending == COMPLETED, outcome.ending
            assert outcome.diagnostics["turns"] == turns

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def bench(provider: str, url: str, stream: bool, attempts: int, turns: int, concurrency: int) -> dict[str, float]:
    model = f"{provider}:{'bench' if provider == 'openai' else 'claude-bench'}"
    variant = VariantConfig.model_validate({"id": "v", "model": model})
    settings = AgentSettings.model_validate({"maxTurns": turns + 1, "provider": {
        "baseUrl": url, "stream": stream, "maxRetries": 0}})

    async def main() -> tuple[float, float]:
        client = AgentClient(variant, settings, ROOT)
        await _attempts(client, concurrency, turns, concurrency)  # warm up: imports, connections
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await _attempts(client, attempts, turns, concurrency)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await client.aclose()
        return cpu, wall

    cpu, wall = asyncio.run(main())
    n = attempts * turns
    return {"cpu_ms_per_turn": cpu / n * 1000, "wall_ms_per_turn": wall / n * 1000 * concurrency}


def floor(url: str, path: str, stream: bool, count: int) -> float:
    """CPU ms of one bare HTTP exchange with the fake server, same body size as a mid-attempt turn."""
    import httpx2

    messages = [{"role": "user", "content": "How many claw hammers are in stock?"}]
    for i in range(2):
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{i}", "type": "function",
                         "function": {"name": "lookup", "arguments": '{"sku": "HAM-001"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "unknown tool 'lookup'"})
    body = {"model": "bench" if "/v1" in url else "claude-bench", "messages": messages, "stream": stream,
            "max_tokens": 4096}

    async def run() -> float:
        async with httpx2.AsyncClient() as client:
            for _ in range(20):
                (await client.post(url + path, json=body)).read()
            t0 = time.process_time()
            for _ in range(count):
                response = await client.post(url + path, json=body)
                response.read()
                response.json() if not stream else response.text.splitlines()
            return (time.process_time() - t0) / count * 1000

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    recv, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=_serve, args=(args.turns, send), daemon=True)
    server.start()
    port = recv.recv()
    try:
        print(f"{args.attempts} attempts x {args.turns} model turns, concurrency {args.concurrency}, "
              f"fake provider in a separate process; median of {args.repeat}")
        print(f"{'provider':<10} {'mode':<7} {'total CPU':>10} {'HTTP floor':>11} {'overhead':>9} {'wall':>8}"
              "   (ms per model turn)")
        worst = 0.0
        for provider, url, path in (("openai", f"http://127.0.0.1:{port}/v1", "/chat/completions"),
                                    ("anthropic", f"http://127.0.0.1:{port}", "/v1/messages")):
            for stream in (False, True):
                runs = [bench(provider, url, stream, args.attempts, args.turns, args.concurrency)
                        for _ in range(args.repeat)]
                cpu = statistics.median(r["cpu_ms_per_turn"] for r in runs)
                wall = statistics.median(r["wall_ms_per_turn"] for r in runs)
                bare = statistics.median(floor(url, path, stream, args.attempts) for _ in range(args.repeat))
                overhead = cpu - bare
                worst = max(worst, overhead)
                print(f"{provider:<10} {'stream' if stream else 'json':<7} {cpu:>10.3f} {bare:>11.3f} "
                      f"{overhead:>9.3f} {wall:>8.3f}")
        print(f"worst overhead {worst:.3f} ms/turn (budget 2 ms): {'OK' if worst <= 2.0 else 'OVER BUDGET'}")
        if worst > 2.0:
            raise SystemExit(1)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
