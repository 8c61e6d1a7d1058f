"""A fake judge provider and auth gateway over real HTTP on 127.0.0.1, and judges that call it.

``POST /token`` issues a fresh token that expires ``ttl`` seconds later (what an
``MST_LLM_AUTH_COMMAND`` fetches); ``POST /judge`` is a judge call: it counts the calls in flight
(``max_active``), records when each started, answers 401 to a missing or expired token when
``auth`` is on, and 429 with ``retry-after`` to the first ``fail_first`` calls. ``POST
/v1/chat/completions`` is the same call made by an LLM judge through the real ``openai`` SDK (a
``baseUrl`` gateway): counted and refused alike, answered with a ``submit_verdict`` tool call
whose reason names the bearer token it was called with. Standard library only, so the judges'
HTTP client is the only client code involved.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers import basic_eval, mock_variant, write_eval


@dataclass
class Gateway:
    delay: float = 0.2
    ttl: float = 60.0
    auth: bool = False
    fail_first: int = 0
    retry_after: float = 1.0
    url: str = ""
    active: int = 0
    max_active: int = 0
    starts: list[float] = field(default_factory=list)  # time.time() of each judge call's arrival
    refused: list[tuple[float, int]] = field(default_factory=list)  # (time, status) of each refusal
    tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry (time.time())
    lock: threading.Lock = field(default_factory=threading.Lock)

    def issue(self) -> dict[str, Any]:
        token = "gw-" + secrets.token_hex(12)
        with self.lock:
            self.tokens[token] = time.time() + self.ttl
        return {"token": token, "expiresIn": self.ttl}

    def judge(self, authorization: str | None) -> tuple[int, dict[str, str]]:
        now = time.time()
        with self.lock:
            if self.auth:
                token = (authorization or "").removeprefix("Bearer ")
                if self.tokens.get(token, 0) <= now:
                    self.refused.append((now, 401))
                    return 401, {}
            self.starts.append(now)
            if len(self.starts) <= self.fail_first:
                self.refused.append((now, 429))
                return 429, {"retry-after": f"{self.retry_after:g}"}
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
        return 200, {}


@contextmanager
def serve(gateway: Gateway) -> Iterator[Gateway]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path == "/token":
                code, headers, body = 200, {}, gateway.issue()
            elif self.path.endswith("/chat/completions"):
                code, headers = gateway.judge(self.headers.get("authorization"))
                body = completion(self.headers.get("authorization") if gateway.auth else None) if code == 200 else {
                    "error": {"message": f"refused with {code}", "type": "gateway", "code": str(code)}}
            else:
                code, headers = gateway.judge(self.headers.get("authorization"))
                body = {"passed": code == 200}
            data = json.dumps(body).encode()
            self.send_response(code)
            for key, value in {**headers, "content-type": "application/json",
                               "content-length": str(len(data))}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    gateway.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield gateway
    finally:
        server.shutdown()
        server.server_close()


def completion(authorization: str | None) -> dict[str, Any]:
    """An OpenAI chat completion that submits a passing verdict."""
    token = (authorization or "").removeprefix("Bearer ")
    verdict = {"passed": True, "reason": f"called with {token}" if token else "ok"}
    call = {"id": "call_1", "type": "function",
            "function": {"name": "submit_verdict", "arguments": json.dumps(verdict)}}
    return {"id": "chatcmpl-gw", "object": "chat.completion", "created": 0, "model": "gw-judge",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}


# A code judge that calls the gateway through the grading's judge access: one slot per call, a
# 429 holds the provider for everyone, the gateway token read fresh for every call. It prints
# the token (a worker's log must show it redacted) and puts it in its reason (so must results).
JUDGES = '''
import json, urllib.error, urllib.request
from mst.grading.judge_access import AUTH_TOKEN, current
from mst.grading.preflight import JudgeNeeds

def call(trial, options):
    access = current()
    for _ in range(20):
        with access.slot_sync("gw"):
            token = access.credential(AUTH_TOKEN) if options.get("auth") else None
            headers = {"authorization": f"Bearer {token}"} if token else {}
            request = urllib.request.Request(options["url"] + "/judge", data=b"{}", method="POST",
                                             headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    json.load(response)
            except urllib.error.HTTPError as exc:
                if exc.code != 429:
                    raise
                access.hold("gw", float(exc.headers.get("retry-after") or 1))
                continue
        print(f"judge used token={token}", flush=True)
        return True, f"called with {token}"
    raise RuntimeError("the gateway kept answering 429")

def needy(trial, options):
    return True

needy.needs = JudgeNeeds(env=tuple(NEEDS["env"]), binaries=tuple(NEEDS["binaries"]), imports=tuple(NEEDS["imports"]))
'''


def gateway_eval(tmp: Path, gateway: Gateway, *, cases: int = 6, trials: int = 2, limits: dict[str, Any] | None = None,
                 auth: bool = False, llm: bool = False, **overrides: Any) -> Path:
    """An eval whose one judge ``gw`` calls the gateway: a code judge, or with ``llm`` an LLM
    judge (``openai:gw-judge`` at the gateway's ``baseUrl``, so its provider is ``openai``)."""
    (tmp / "judges.py").write_text("NEEDS = {'env': [], 'binaries': [], 'imports': []}\n" + JUDGES)
    judge: dict[str, Any] = (
        {"id": "gw", "llm": {"model": "openai:gw-judge", "rubric": "Is it right?", "baseUrl": gateway.url + "/v1"}}
        if llm else {"id": "gw", "code": "judges:call", "options": {"url": gateway.url, "auth": auth}})
    doc = basic_eval(
        trials=trials,
        cases=[{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(cases)],
        variants=[mock_variant("base", baseline=True), mock_variant("cand")],
        judges=[judge],
        **({"judgeLimits": limits} if limits else {}),
    )
    doc.update(overrides)
    return write_eval(tmp, doc)


def needy_eval(tmp: Path, *, env: tuple[str, ...] = (), binaries: tuple[str, ...] = (),
               imports: tuple[str, ...] = ()) -> Path:
    """An eval whose one judge declares what it needs (``needs`` on the callable)."""
    needs = {"env": list(env), "binaries": list(binaries), "imports": list(imports)}
    (tmp / "judges.py").write_text(f"NEEDS = {needs!r}\n" + JUDGES)
    doc = basic_eval(trials=1, cases=[{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(3)],
                     variants=[mock_variant("base")], judges=[{"id": "needy", "code": "judges:needy"}])
    return write_eval(tmp, doc)


def auth_command(gateway: Gateway) -> str:
    """An MST_LLM_AUTH_COMMAND that fetches a token from the gateway and prints its JSON."""
    script = ("import sys, urllib.request; "
              "sys.stdout.write(urllib.request.urlopen(urllib.request.Request(sys.argv[1] + '/token', "
              "data=b'', method='POST')).read().decode())")
    return f"{sys.executable} -c \"{script}\" {gateway.url}"
