"""OTLP export speed: attempts per second sent to an OTLP/HTTP receiver on 127.0.0.1.

A run of ``--attempts`` mock attempts (2 variants, each attempt: two model requests, one tool
call, two assertion verdicts and a code judge) is collected and graded once into a temporary
directory; then ``mst.export.otlp.export_run`` sends it ``--repeat`` times to a receiver running
in another process (it decodes every request with opentelemetry-proto and counts the spans, so
its CPU is not the exporter's). The figure is attempts / wall seconds of ``export_run`` — reading
run.json, results.json and every transcript, building the spans, encoding and POSTing them — and
the exporting process's CPU (user+sys) beside it. Target: ≥ 5,000 attempts/s.

    .venv/bin/python bench/bench_otlp.py [--attempts 10000] [--repeat 3] [--keep DIR] [--sdk-encoder]

Figures: bench/otlp.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

RECEIVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
spans = 0
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        global spans
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/count":
            out = str(spans).encode(); spans = 0
        else:
            req = ExportTraceServiceRequest(); req.ParseFromString(body)
            spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
            out = b""
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
server = HTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

JUDGES = "def says_ok(trial):\n    return {'passed': 'ok' in (trial.answer or ''), 'reason': 'looked for ok'}\n"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _eval(attempts: int) -> dict[str, Any]:
    mock = {"steps": [{"tool": "lookup", "args": {"q": "x"}}], "answer": "ok"}
    variants = [{"id": v, "model": "mock", "baseline": v == "a", "settings": {"mock": mock}} for v in ("a", "b")]
    return {"name": "bench-otlp", "trials": attempts // 2, "concurrency": 16, "deadlineSeconds": 60,
            "variants": variants, "cases": [{"id": "c1", "prompt": "say ok", "expected": "ok"}],
            "assertions": [{"type": "final-answer"}, {"type": "contains", "value": "ok"}],
            "judges": [{"id": "says-ok", "code": "judges:says_ok"}]}


def _make_run(directory: Path, attempts: int) -> Path:
    from mst.api import run_eval

    (directory / "judges.py").write_text(JUDGES)
    path = directory / "eval.yaml"
    path.write_text(yaml.safe_dump(_eval(attempts)))
    outcome = run_eval(path, runs_dir=directory / "runs")
    return outcome.run.paths.root


def _count(port: int) -> int:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/count", data=b"")) as r:
        return int(r.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", type=int, default=10000)  # only when the run is made
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="make (or reuse) the run in this directory")
    parser.add_argument("--sdk-encoder", action="store_true",
                        help="give the exporter SDK spans to encode itself (the path without otlp_wire)")
    args = parser.parse_args()
    from mst.export import otlp
    from mst.export.otlp import export_run

    if args.sdk_encoder:
        made_sender = otlp._Sender.__init__

        def sdk_sender(self: Any, url: str) -> None:
            made_sender(self, url)
            self.client, self.convert = None, otlp.sdk_converter(otlp.resource_attributes())

        otlp._Sender.__init__ = sdk_sender  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        runs = sorted((base / "runs").glob("*-bench-otlp-*")) if (base / "runs").is_dir() else []
        t0 = time.monotonic()
        run_dir = runs[-1] if runs else _make_run(base, args.attempts)
        made = time.monotonic() - t0
        server = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            results = []
            for _ in range(args.repeat):
                cpu0, wall0 = _cpu(), time.perf_counter()
                sent = export_run(run_dir, f"http://127.0.0.1:{port}")
                wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
                received = _count(port)
                assert received == sent.spans, (received, sent)
                results.append({"attempts": sent.attempts, "spans": sent.spans, "wall": wall, "cpu": cpu})
        finally:
            server.terminate()
            server.wait()
    best = min(results, key=lambda r: r["wall"])
    print(json.dumps({"run": str(run_dir), "madeInS": round(made, 1), "runs": results}))
    print(f"{best['attempts']} attempts, {best['spans']} spans: best wall {best['wall']:.3f} s → "
          f"{best['attempts'] / best['wall']:,.0f} attempts/s (CPU {best['cpu']:.3f} s → "
          f"{best['attempts'] / best['cpu']:,.0f} attempts per CPU-second); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
