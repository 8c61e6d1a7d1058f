"""Shared helpers for the custom-grader tests: a sample session and one-grader runners."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest

from mst.graders.custom.js import JsGrader, JsLimits, JsOutcome, isolation_problem, lookups_data, run_js_graders
from mst.session.lookups import create_session_lookups

Event = dict[str, Any]

needs_isolation = pytest.mark.skipif(
    isolation_problem() is not None, reason=f"no Node isolation: {isolation_problem()}"
)


def ev(etype: str, data: dict[str, Any] | None = None, phase: str = "agent") -> Event:
    return {"type": etype, "data": data or {}, "provenance": {"component": "test", "phase": phase}}


def sample_session() -> list[Event]:
    """Three tool calls (one failed), two model requests, a result: small, with every lookup filled."""
    return [
        ev("session.format", {"version": 1}),
        ev("tool.execution_start", {"toolName": "search", "toolCallId": "1", "input": {"q": "a"}}),
        ev("tool.execution_complete", {"toolCallId": "1", "success": True}),
        ev("tool.execution_start", {"toolName": "search", "toolCallId": "2", "input": {"q": "b"}}),
        ev("tool.execution_complete", {"toolCallId": "2", "success": False}),
        ev("tool.execution_start", {"toolName": "fetch", "toolCallId": "3", "input": {}}),
        ev("tool.execution_complete", {"toolCallId": "3", "success": True}),
        ev("model.request", {"usage": {"inputTokens": 100, "outputTokens": 10}}),
        ev("model.request", {"usage": {"inputTokens": 150, "outputTokens": 20}}),
        ev("session.result", {"durationMs": 1234}),
    ]


def payload(session: list[Event]) -> bytes:
    return orjson.dumps({"session": session, "lookups": lookups_data(create_session_lookups(session))})


FAST = JsLimits(timeout=2.0, heap_mb=128)


def run_js(script: str, session: list[Event] | None = None, config: dict[str, Any] | None = None,
           limits: JsLimits = FAST) -> JsOutcome:  # fmt: skip
    session = sample_session() if session is None else session
    return run_js_graders([JsGrader("probe", script, config or {})], payload(session), limits)["probe"]


@contextmanager
def listening_server() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 that records every connection it accepts (and what it read)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    received.append(b"connected:" + conn.recv(65536))
                except OSError:
                    received.append(b"connected")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], received
    finally:
        stop.set()
        thread.join(2)
        server.close()
