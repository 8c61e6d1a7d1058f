"""How an attempt ended: the closed set (docs/endings.md), decided once by its producer.

An attempt is either a *trial* (graded, counts in pass rates, even when the client errored or
ran out of its own turns, time or context) or an *infrastructure failure* (something around
the client broke; left out of pass rates). Producers (clients, the collector, shard workers)
build an :data:`Ending` where the attempt ended; :func:`stored_ending` is the one adapter that
turns what a producer handed back (an ending, or an exception it threw) into the stored one.
Readers (summary, resume, report) call the predicates here and never look at error text.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

TrialOutcome = Literal["completed", "client-error", "turn-limit", "time-limit", "context-limit"]
InfraWhat = Literal["client-app", "workspace", "network", "provider-api", "collection", "deadline", "setup"]

TRIAL_OUTCOMES: Final[tuple[str, ...]] = get_args(TrialOutcome)
INFRA_WHATS: Final[tuple[str, ...]] = get_args(InfraWhat)


@dataclass(frozen=True, slots=True)
class Trial:
    """The client had its go: graded as usual, whatever the outcome."""

    outcome: TrialOutcome = "completed"
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Infrastructure:
    """Something mst can name around the client broke; says nothing about the client."""

    what: InfraWhat
    why: str
    retryable: bool


Ending = Trial | Infrastructure
_ENDING_TYPES: Final = (Trial, Infrastructure)

COMPLETED: Final = Trial("completed")


class EndingError(ValueError):
    """A stored ending that is not in the closed set."""


# ---------------------------------------------------------------------------------------------
# Predicates every reader uses


def is_trial(ending: Ending) -> bool:
    return isinstance(ending, Trial)


def is_retryable(ending: Ending) -> bool:
    """Resume collects an attempt again only when this holds: never for a trial."""
    return isinstance(ending, Infrastructure) and ending.retryable


def infrastructure_error(ending: Ending) -> str | None:
    """The legacy ``infrastructureError`` string, derived from the ending (never parsed back)."""
    if isinstance(ending, Infrastructure):
        return f"{ending.what}: {ending.why}"
    return None


# ---------------------------------------------------------------------------------------------
# Stored form


def to_json(ending: Ending) -> dict[str, Any]:
    if isinstance(ending, Trial):
        out: dict[str, Any] = {"kind": "trial", "outcome": ending.outcome}
        if ending.detail is not None:
            out["detail"] = ending.detail
        return out
    return {"kind": "infrastructure", "what": ending.what, "why": ending.why, "retryable": ending.retryable}


def from_json(data: Any) -> Ending:
    """Parse a stored ending, refusing anything outside the closed set."""
    if not isinstance(data, dict):
        raise EndingError(f"an ending must be an object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind == "trial":
        outcome = data.get("outcome", "completed")
        if outcome not in TRIAL_OUTCOMES:
            raise EndingError(f"unknown trial outcome {outcome!r}; expected one of {', '.join(TRIAL_OUTCOMES)}")
        detail = data.get("detail")
        return Trial(outcome, None if detail is None else str(detail))
    if kind == "infrastructure":
        what = data.get("what")
        if what not in INFRA_WHATS:
            raise EndingError(f"unknown infrastructure failure {what!r}; expected one of {', '.join(INFRA_WHATS)}")
        retryable = data.get("retryable")
        if not isinstance(retryable, bool):
            raise EndingError("an infrastructure ending needs a boolean 'retryable'")
        return Infrastructure(what, str(data.get("why", "")), retryable)
    raise EndingError(f"unknown ending kind {kind!r}; expected 'trial' or 'infrastructure'")


# Old runs (before endings) stored a failure kind and an error string. These kinds were the
# producers' own typed classification, so mapping them is not text parsing.
_LEGACY_KINDS: Final[dict[str, tuple[InfraWhat, bool]]] = {
    "client-app": ("client-app", True),
    "client-crash": ("client-app", True),
    "workspace": ("workspace", True),
    "network": ("network", True),
    "provider-api": ("provider-api", True),
    "rate-limit": ("provider-api", True),
    "collection": ("collection", True),
    "missing": ("collection", True),
    "not-submitted": ("collection", True),
    "deadline": ("deadline", True),
    "timeout": ("deadline", True),
    "setup": ("setup", False),
    # A Claude Code trial that hit its turn limit was stored as infrastructure and the stored
    # transcript lacks the detail to reclassify it: it keeps that classification (docs/endings.md).
    "turn-limit": ("client-app", False),
}


def from_record(record: dict[str, Any]) -> Ending:
    """The ending of a stored attempt record, mapping records written before endings existed.

    Old runs keep the classification they were recorded with, except a trial a grader couldn't
    score: that becomes an (ungraded) trial, because grading never decides an ending.
    """
    if "ending" in record and record["ending"] is not None:
        return from_json(record["ending"])
    kind = record.get("failureKind")
    infra = record.get("infrastructureError")
    if kind == "grading":
        return COMPLETED
    if isinstance(kind, str) and kind in _LEGACY_KINDS:
        what, retryable = _LEGACY_KINDS[kind]
        return Infrastructure(what, str(infra or record.get("error") or kind), retryable)
    if infra:
        # A stored infrastructure failure with no failure kind reads as a retryable client-app one.
        return Infrastructure("client-app", str(infra), True)
    error = record.get("error")
    return Trial("client-error", str(error)) if error else COMPLETED


# ---------------------------------------------------------------------------------------------
# The one adapter from a producer's ending to the stored one


_NETWORK_ERRNOS: Final = frozenset(
    {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.EHOSTUNREACH, errno.ENETUNREACH,
     errno.ENETDOWN, errno.ETIMEDOUT, errno.EPIPE}
)
# Transport-level exception types of HTTP stacks a client may let escape; matched by type, not text.
_NETWORK_TYPES: Final = frozenset(
    {("httpx", "TransportError"), ("httpx2", "TransportError"), ("httpcore", "NetworkError"),
     ("aiohttp.client_exceptions", "ClientConnectionError"), ("openai", "APIConnectionError"),
     ("anthropic", "APIConnectionError")}
)


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | socket.gaierror | socket.timeout):
        return True
    if isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS:
        return True
    for cls in type(exc).__mro__:
        module = cls.__module__
        if (module, cls.__name__) in _NETWORK_TYPES or (module.split(".")[0], cls.__name__) in _NETWORK_TYPES:
            return True
    return False


def from_exception(exc: BaseException) -> Ending:
    """The small rule for exceptions caught from a client that threw.

    A network error (by type, following ``__cause__``/``__context__``) is a retryable network
    failure; an exception that carries an ending (:class:`EndingException`) keeps it; anything
    else unrecognised is a retryable client-app failure.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, EndingException):
            return current.ending
        if _is_network_error(current):
            return Infrastructure("network", f"{type(current).__name__}: {current}".rstrip(": "), True)
        current = current.__cause__ or current.__context__
    return Infrastructure("client-app", f"client raised {type(exc).__name__}: {exc}".rstrip(": "), True)


class EndingException(Exception):
    """Raised by a producer deep in its stack to end the attempt with a typed ending."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(infrastructure_error(ending) or (ending.detail if isinstance(ending, Trial) else ""))
        self.ending = ending


def stored_ending(produced: Ending | BaseException, *, deadline_passed: bool = False) -> Ending:
    """The ending recorded for an attempt: the collector and shard workers both call this.

    ``deadline_passed`` is set by the collector when mst's own per-attempt deadline cancelled the
    client; that is mst's deadline (infrastructure), not the client's time budget (a trial).
    """
    if deadline_passed:
        return Infrastructure("deadline", "the attempt passed mst's per-attempt deadline", True)
    if isinstance(produced, _ENDING_TYPES):  # a tuple made once: ``Trial | Infrastructure`` is built per call
        return produced
    if isinstance(produced, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
        raise produced
    return from_exception(produced)


def describe(ending: Ending) -> str:
    """A one-line human description for tables and logs."""
    if isinstance(ending, Trial):
        return ending.outcome if ending.detail is None else f"{ending.outcome} ({ending.detail})"
    return f"{ending.what}{'' if ending.retryable else ' (not retryable)'}: {ending.why}"
