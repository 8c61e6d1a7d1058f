"""The judges' access in one process: caps, holds, the slot API, tokens and their redaction."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mst.config.errors import UserError
from mst.config.judge_limits import JudgeLimit
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess, Lease, LeaseBroker, LocalLeases, current, using
from mst.grading.judge_auth import AuthCommandError, CommandToken, PushedToken, Token, command_token, parse_output
from mst.grading.sources import LiveSource
from mst.runners.protocol import (
    AuthToken,
    Hold,
    LeaseGranted,
    LeaseRelease,
    LeaseRequest,
    Tokens,
    encode,
    parse_coordinator,
    parse_worker,
)
from mst.session.redact import NO_REDACTION, Redactor


def _access(**limits: JudgeLimit) -> JudgeAccess:
    return JudgeAccess(LocalLeases(limits))


class Meter:
    """Counts calls in flight and records when each began."""

    def __init__(self) -> None:
        self.active = self.most = 0
        self.starts: list[float] = []
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.starts.append(time.monotonic())

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


def _threads(count: int, body: Callable[[], None]) -> None:
    threads = [threading.Thread(target=body) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)


def test_sync_slots_never_exceed_the_concurrency_cap() -> None:
    access, meter = _access(p=JudgeLimit(concurrency=2)), Meter()

    def call() -> None:
        with access.slot_sync("p"):
            meter.enter()
            time.sleep(0.05)
            meter.leave()

    _threads(8, call)
    assert meter.most == 2 and len(meter.starts) == 8


def test_requests_per_minute_spaces_the_starts() -> None:
    access, meter = _access(p=JudgeLimit(requestsPerMinute=600)), Meter()  # one start per 0.1 s

    def call() -> None:
        with access.slot_sync("p"):
            meter.enter()
            meter.leave()

    _threads(5, call)
    starts = sorted(meter.starts)
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.09


def test_a_hold_stops_new_calls_to_its_provider_only() -> None:
    access = _access()
    access.hold("p", 0.3)
    began = time.monotonic()
    with access.slot_sync("other"):
        assert time.monotonic() - began < 0.1
    with access.slot_sync("p"):
        assert time.monotonic() - began >= 0.28


def test_async_slots_hold_the_cap_and_a_cancelled_waiter_leaks_nothing() -> None:
    access, meter = _access(p=JudgeLimit(concurrency=2)), Meter()

    async def call() -> None:
        async with access.slot("p"):
            meter.enter()
            await asyncio.sleep(0.05)
            meter.leave()

    async def main() -> float:
        await asyncio.gather(*(call() for _ in range(6)))
        single = _access(p=JudgeLimit(concurrency=1))
        async with single.slot("p"):
            waiter = asyncio.create_task(single.slot("p").__aenter__())
            await asyncio.sleep(0.05)
            waiter.cancel()
        began = time.monotonic()
        async with single.slot("p"):  # the cancelled waiter's slot did not stay taken
            return time.monotonic() - began

    assert asyncio.run(main()) < 0.5
    assert meter.most == 2 and len(meter.starts) == 6


def test_code_judges_reach_the_gradings_access_sync_and_async() -> None:
    access = _access()
    assert current() is not access
    with using(access):
        assert current() is access

    async def async_judge() -> JudgeAccess:
        return current()

    source = LiveSource(access=access)
    assert source._call(current, ()) is access

    async def inside_a_loop() -> JudgeAccess:  # an async judge then runs in a helper thread
        result: JudgeAccess = source._call(async_judge, ())
        return result

    assert asyncio.run(inside_a_loop()) is access


def test_credentials_come_from_the_secrets_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_ENV", "env-value")
    access = JudgeAccess(secrets={"FROM_FILE": "file-value"})
    assert access.credential("FROM_FILE") == "file-value"
    assert access.credential("FROM_ENV") == "env-value"
    assert access.credential("NOWHERE_AT_ALL") is None
    assert access.credential(AUTH_TOKEN) is None


# --- MST_LLM_AUTH_COMMAND -------------------------------------------------------------------------


def test_the_command_output_forms() -> None:
    now = 1000.0
    bare = parse_output("tok-bare\n", 90, now)
    assert (bare.value, bare.expires_at, bare.refresh_at) == ("tok-bare", 1090.0, 1060.0)
    assert parse_output('{"token": "t1", "expiresIn": 30}', 90, now).expires_at == 1030.0
    assert parse_output('{"token": "t1", "expiresAt": 1500}', 90, now).expires_at == 1500.0
    assert parse_output('{"token": "t1", "expiresAt": "1970-01-01T00:20:00Z"}', 90, now).expires_at == 1200.0
    assert parse_output('{"token": "t1"}', 90, now).expires_at == 1090.0


@pytest.mark.parametrize(("out", "said"), [
    ("", "printed nothing"), ("two words", "more than one word"), ("{not json", "not JSON"),
    ('{"tok": "x"}', 'no "token"'), ('{"token": "x", "expiresAt": "soon"}', "not an ISO 8601 time"),
])
def test_bad_command_output_is_a_user_error(out: str, said: str) -> None:
    with pytest.raises(AuthCommandError, match=said):
        parse_output(out, 60, 0.0)


def _counting_command(tmp: Path, ttl: float) -> str:
    script = tmp / "auth.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "p = pathlib.Path(sys.argv[1]); n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n))\n"
        f"print(json.dumps({{'token': f'tok-{{n:04d}}', 'expiresIn': {ttl}}}))\n")
    return f"{sys.executable} {script} {tmp / 'count'}"


def test_the_token_is_made_again_once_due_and_redacted_first(tmp_path: Path) -> None:
    token = CommandToken(_counting_command(tmp_path, 0.3))
    redactor = Redactor(["some-secret"])
    token.on_new(lambda made: redactor.add([made.value]))
    access = JudgeAccess(token=token)
    first = access.credential(AUTH_TOKEN)
    assert first == "tok-0001" and access.credential(AUTH_TOKEN) == first  # not due: kept
    time.sleep(0.25)  # two thirds of 0.3 s have passed
    assert access.credential(AUTH_TOKEN) == "tok-0002"
    assert token.issued == ["tok-0001", "tok-0002"]
    assert redactor.text("tok-0001 tok-0002") == "[REDACTED] [REDACTED]"


def test_a_failing_command_never_shows_its_output(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('leaked-secret-9876', file=sys.stderr)\nsys.exit(7)\n")
    with pytest.raises(AuthCommandError) as caught:
        CommandToken(f"{sys.executable} {script}").fresh()
    assert "exited with status 7" in str(caught.value) and "leaked" not in str(caught.value)
    with pytest.raises(AuthCommandError, match="not found on PATH"):
        CommandToken("mst-no-such-auth-command").fresh()


def test_the_environment_names_the_command_and_its_ttl() -> None:
    assert command_token({}) is None
    made = command_token({"MST_LLM_AUTH_COMMAND": "get-token --fast", "MST_LLM_AUTH_TTL": "42"})
    assert made is not None and made.argv == ["get-token", "--fast"] and made.ttl == 42
    with pytest.raises(UserError, match="MST_LLM_AUTH_TTL"):
        command_token({"MST_LLM_AUTH_COMMAND": "x", "MST_LLM_AUTH_TTL": "-1"})


def test_a_pushed_token_past_its_refresh_point_asks_and_waits_for_the_next() -> None:
    asked: list[int] = []
    now = time.time()
    pushed = PushedToken(Token("old-token", now + 5, now - 1), lambda: asked.append(1))
    threading.Timer(0.1, lambda: pushed.update(Token("new-token", now + 60, now + 40))).start()
    assert pushed.current() == "new-token"
    assert asked == [1]
    assert pushed.current() == "new-token" and asked == [1]  # fresh: no asking


def test_the_redactor_learns_new_secrets_and_the_shared_one_refuses() -> None:
    redactor = Redactor(["first-secret"])
    redactor.add(["second-secret", "abc"])  # under 4 characters: ignored, as at construction
    assert redactor.text("first-secret second-secret abc") == "[REDACTED] [REDACTED] abc"
    with pytest.raises(ValueError):
        NO_REDACTION.add(["x-secret"])


def test_the_new_wire_messages_round_trip() -> None:
    for message in (LeaseRequest(id=3, provider="openai"), LeaseRelease(id=3), Hold(provider="openai", seconds=2.5)):
        assert parse_worker(encode(message)) == message
    tokens = Tokens(secrets={"K": "v"}, auth=AuthToken(token="t", expiresAt=10.0, refreshAt=7.0))
    assert '"expiresAt":10.0' in encode(tokens)
    for back in (tokens, LeaseGranted(id=3)):
        assert parse_coordinator(encode(back)) == back


def test_a_grant_given_straight_back_frees_its_slot() -> None:
    broker = LeaseBroker({"p": JudgeLimit(concurrency=1)})
    given: list[Lease] = []

    def give_back(lease: Lease) -> bool:  # what a waiter that gave up mid-grant does, in the granting thread
        broker.release("w", lease.id)
        return True

    broker.request("w", Lease(1, "p"), give_back)
    broker.pump()
    broker.request("w", Lease(2, "p"), lambda lease: given.append(lease) is None)
    broker.pump()
    assert given == [Lease(2, "p")]


def test_a_dropped_owner_frees_its_slots_and_requests() -> None:
    broker = LeaseBroker({"p": JudgeLimit(concurrency=1)})
    given: list[tuple[str, int]] = []
    broker.request("a", Lease(1, "p"), lambda lease: given.append(("a", lease.id)) is None)
    broker.request("a", Lease(2, "p"), lambda lease: given.append(("a", lease.id)) is None)
    broker.request("b", Lease(1, "p"), lambda lease: given.append(("b", lease.id)) is None)
    broker.pump()
    broker.drop("a")  # a shard that ended: its slot is free, its waiting request gone
    broker.pump()
    assert given == [("a", 1), ("b", 1)]
