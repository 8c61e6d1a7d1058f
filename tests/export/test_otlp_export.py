"""`mst run --otlp` and `mst export otlp`, against an OTLP/HTTP receiver on 127.0.0.1 that decodes
the protobuf payloads (tests/export/otlp_receiver.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.export.otlp_receiver import receiver
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval

STEPS = [{"tool": "lookup", "args": {"q": "x"}}]


def _eval(tmp_path: Path) -> Path:
    doc = basic_eval(variants=[mock_variant("base", baseline=True, steps=STEPS, answer="42"),
                               mock_variant("cand", steps=STEPS, answer="7")])
    return write_eval(tmp_path, doc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _transcript(run: Path, rec: dict[str, Any]) -> list[dict[str, Any]]:
    from mst.session.io import read_transcript

    return read_transcript(run / rec["transcript"])


def test_mst_run_otlp_sends_one_trace_per_attempt_with_its_children(tmp_path: Path) -> None:
    with receiver() as rec:
        done = run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", "--otlp", rec.url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "otlp: sent 8 attempts" in done.stderr
    assert {r["path"] for r in rec.requests} == {"/v1/traces"}
    assert {r["type"] for r in rec.requests} == {"application/x-protobuf"}
    assert rec.requests[0]["resource"]["service.name"] == "mst"
    run = only_run(tmp_path / "runs")
    attempts = load(run / "run.json")["attempts"]
    results = {(t["variant"], t["case"], t["trial"]): t for t in load(run / "results.json")["trials"]}
    roots = {(s["attrs"]["mst.variant"], s["attrs"]["mst.case"], s["attrs"]["mst.trial"]): s
             for s in rec.spans if s["parent"] is None}
    assert len(roots) == len(attempts) == 8
    for attempt in attempts:
        key = (attempt["variant"], attempt["case"], attempt["trial"])
        root = roots[key]
        a = root["attrs"]
        assert a["mst.eval"] == "t" and a["mst.run.id"] == run.name
        ending_attrs = (a["mst.ending.kind"], a["mst.ending.outcome"], a["mst.ending.retryable"])
        assert ending_attrs == ("trial", "completed", False)
        assert a["mst.passed"] is results[key]["passed"]
        assert a["mst.verdicts"] == [f"{v['judge']}={'pass' if v['passed'] else 'fail'}"
                                     for v in results[key]["verdicts"]]
        assert root["start"] == int(attempt["startedAt"] * 1_000_000)
        children = [s for s in rec.spans if s["trace_id"] == root["trace_id"] and s["parent"] is not None]
        assert {c["parent"] for c in children} == {root["span_id"]}
        events = _transcript(run, attempt)
        requests = [e for e in events if e["type"] == "model.request"]
        chats = [c for c in children if c["attrs"].get("gen_ai.operation.name") == "chat"]
        assert [c["attrs"]["gen_ai.usage.input_tokens"] for c in chats] == [e["data"]["inputTokens"] for e in requests]
        assert all(c["attrs"]["gen_ai.request.model"] == "mock" and c["kind"] == 3 for c in chats)  # CLIENT
        tools = [c for c in children if c["attrs"].get("gen_ai.operation.name") == "execute_tool"]
        assert [t["attrs"]["gen_ai.tool.name"] for t in tools] == ["lookup"]
        assert tools[0]["status"] == 2 and tools[0]["attrs"]["mst.tool.rejected"] is True  # no server: refused
        for child in chats + tools:
            assert root["start"] <= child["start"] <= child["end"] <= root["end"]
        base = root["start"]
        assert chats[0]["end"] == base + requests[0]["provenance"]["timestampMs"] * 1_000_000


def test_export_otlp_sends_a_stored_run_again_with_the_same_ids(tmp_path: Path) -> None:
    assert run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    run = only_run(tmp_path / "runs")
    sent = []
    for _ in range(2):
        with receiver() as rec:
            done = run_cli("export", "otlp", str(run), "--endpoint", rec.url, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("sent 8 attempts (")
            sent.append(sorted((s["trace_id"], s["span_id"]) for s in rec.spans))
    assert sent[0] == sent[1] and len({t for t, _ in sent[0]}) == 8


def test_the_endpoint_comes_from_otel_exporter_otlp_endpoint(tmp_path: Path) -> None:
    assert run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    with receiver() as rec:
        done = run_cli("export", "otlp", "runs", cwd=tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": rec.url})
        assert done.returncode == 0, done.stderr
    assert len([s for s in rec.spans if s["parent"] is None]) == 8


def test_an_unreachable_endpoint_is_a_warning_and_the_run_is_kept(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    done = run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", "--otlp", url, cwd=tmp_path,
                   env={"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1"})
    assert done.returncode == 0, done.stderr
    assert f"warning: OTLP export failed: {url}/v1/traces: the OTLP endpoint did not take the spans" in done.stderr
    assert "mst export otlp RUN" in done.stderr
    run = only_run(tmp_path / "runs")
    assert load(run / "run.json")["phases"] == {"collect": "complete", "grade": "complete"}
    assert len(load(run / "results.json")["trials"]) == 8


def test_a_refusing_endpoint_is_an_error_naming_it_and_how_far_it_got(tmp_path: Path) -> None:
    assert run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    with receiver(status=400) as rec:
        done = run_cli("export", "otlp", "runs", "--endpoint", rec.url, cwd=tmp_path)
    assert done.returncode == 2
    assert f"error: {rec.url}/v1/traces: the OTLP endpoint did not take the spans" in done.stderr
    assert "400" in done.stderr and "0 of 8 attempts were sent" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_extra_says_how_to_install_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from mst.cli.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("opentelemetry") else real(name, *a))
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["run", str(_eval(tmp_path)), "--runs-dir", "runs", "--otlp", "http://x:1"])
    assert out.exit_code == 2
    assert "pip install 'mst[otlp]'" in out.output
    assert not (tmp_path / "runs").exists()  # refused before collecting anything
    out = CliRunner().invoke(main, ["export", "otlp", str(tmp_path)])
    assert out.exit_code == 2 and "pip install 'mst[otlp]'" in out.output


def test_help_does_not_import_the_sdk() -> None:
    code = ("import sys; from click.testing import CliRunner; from mst.cli.main import main; "
            "r = CliRunner(); assert r.invoke(main, ['--help']).exit_code == 0; "
            "assert r.invoke(main, ['export', 'otlp', '--help']).exit_code == 0; "
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'google.protobuf'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_attempt_whose_transcript_is_gone_still_sends_its_root_saying_why(tmp_path: Path) -> None:
    assert run_cli("run", str(_eval(tmp_path)), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    run = only_run(tmp_path / "runs")
    gone = load(run / "run.json")["attempts"][0]
    (run / gone["transcript"]).unlink()
    with receiver() as rec:
        assert run_cli("export", "otlp", str(run), "--endpoint", rec.url, cwd=tmp_path).returncode == 0
    [root] = [s for s in rec.spans if s["parent"] is None and s["attrs"]["mst.case"] == gone["case"]
              and s["attrs"]["mst.variant"] == gone["variant"] and s["attrs"]["mst.trial"] == gone["trial"]]
    assert "transcript file is missing" in root["attrs"]["mst.transcript.error"]
    assert not [s for s in rec.spans if s["trace_id"] == root["trace_id"] and s["parent"] is not None
                and s["attrs"].get("gen_ai.operation.name") in ("chat", "execute_tool")]
    assert len([s for s in rec.spans if s["parent"] is None]) == 8
