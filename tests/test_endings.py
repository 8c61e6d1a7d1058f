"""The closed set, the producer adapter, the network rule and the legacy mapping."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest

from mst import endings
from mst.endings import COMPLETED, EndingException, Infrastructure, Trial


def test_round_trip_every_member_of_the_closed_set() -> None:
    for outcome in endings.TRIAL_OUTCOMES:
        e = Trial(outcome, "d")  # type: ignore[arg-type]
        assert endings.from_json(endings.to_json(e)) == e
        assert endings.is_trial(e) and not endings.is_retryable(e)
        assert endings.infrastructure_error(e) is None
    for what in endings.INFRA_WHATS:
        for retryable in (True, False):
            e2 = Infrastructure(what, "why", retryable)  # type: ignore[arg-type]
            assert endings.from_json(endings.to_json(e2)) == e2
            assert endings.is_retryable(e2) is retryable
            assert endings.infrastructure_error(e2) == f"{what}: why"


@pytest.mark.parametrize("bad", [
    {"kind": "trial", "outcome": "exploded"},
    {"kind": "infrastructure", "what": "gremlins", "why": "", "retryable": True},
    {"kind": "infrastructure", "what": "network", "why": ""},
    {"kind": "maybe"},
    "trial",
])
def test_outside_the_closed_set_is_refused(bad: object) -> None:
    with pytest.raises(endings.EndingError):
        endings.from_json(bad)


@pytest.mark.parametrize("exc", [
    ConnectionRefusedError(),
    ConnectionResetError(),
    socket.gaierror(-2, "Name or service not known"),
    OSError(errno.ENETUNREACH, "unreachable"),
    TimeoutError.__new__(socket.timeout),
])
def test_network_rule_by_type(exc: BaseException) -> None:
    ending = endings.from_exception(exc)
    assert isinstance(ending, Infrastructure) and ending.what == "network" and ending.retryable


def test_network_rule_follows_the_cause_chain() -> None:
    try:
        try:
            raise ConnectionResetError("peer reset")
        except ConnectionResetError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert endings.from_exception(outer).what == "network"  # type: ignore[union-attr]


def test_text_is_never_parsed() -> None:
    # An error whose message *says* 429 or network is not classified by its words.
    ending = endings.from_exception(ValueError("HTTP 429 rate limit network error context overflow"))
    assert ending == Infrastructure("client-app", ending.why, True)  # type: ignore[union-attr]


def test_an_exception_carrying_an_ending_keeps_it() -> None:
    e = Trial("turn-limit", "10 turns")
    assert endings.stored_ending(EndingException(e)) == e
    assert endings.stored_ending(e) == e


def test_deadline_wins_and_cancellation_propagates() -> None:
    assert endings.stored_ending(TimeoutError(), deadline_passed=True).what == "deadline"  # type: ignore[union-attr]
    with pytest.raises(asyncio.CancelledError):
        endings.stored_ending(asyncio.CancelledError())


@pytest.mark.parametrize(("record", "expected"), [
    ({}, COMPLETED),
    ({"error": "boom"}, Trial("client-error", "boom")),
    ({"failureKind": "grading", "infrastructureError": "judge failed"}, COMPLETED),
    ({"infrastructureError": "something broke"}, Infrastructure("client-app", "something broke", True)),
    ({"failureKind": "rate-limit", "infrastructureError": "429"}, Infrastructure("provider-api", "429", True)),
    ({"failureKind": "setup", "error": "bad setting"}, Infrastructure("setup", "bad setting", False)),
    ({"failureKind": "turn-limit", "infrastructureError": "max turns"},
     Infrastructure("client-app", "max turns", False)),
])
def test_old_runs_are_mapped_when_read(record: dict[str, object], expected: endings.Ending) -> None:
    assert endings.from_record(record) == expected


def test_a_stored_ending_wins_over_old_fields() -> None:
    record = {"ending": {"kind": "trial", "outcome": "completed"}, "infrastructureError": "stale"}
    assert endings.from_record(record) == COMPLETED
