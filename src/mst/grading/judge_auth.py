"""Expiring judge credentials: the gateway token that ``MST_LLM_AUTH_COMMAND`` makes.

The command (split like a shell line, run without a shell, its stdin empty) prints either a JSON
object ``{"token": "...", "expiresAt": "2026-12-01T20:15:00Z"}`` (``expiresAt`` ISO 8601 or
seconds since the epoch; or ``"expiresIn": seconds`` instead) or a bare token on one line, which
lasts ``MST_LLM_AUTH_TTL`` seconds (default 300). It runs on the coordinator only (a local
grading is its own coordinator); the token is refreshed once two thirds of its lifetime have
passed, and in shards pushed to every worker in a ``tokens`` message (docs/wire-protocol.md).

The token is a secret: it joins the run's redactor the moment it is made, is never written to a
file, a bundle or an argument list, and judges read it with ``access.credential("MST_LLM_AUTH_TOKEN")``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import orjson

from mst.config.errors import Problem, UserError

COMMAND_ENV: Final = "MST_LLM_AUTH_COMMAND"
TTL_ENV: Final = "MST_LLM_AUTH_TTL"
DEFAULT_TTL: Final = 300.0
COMMAND_TIMEOUT: Final = 60.0
REFRESH_AT: Final = 2 / 3  # of a token's lifetime: refreshed with a third of it left


class AuthCommandError(UserError):
    """The auth command failed or printed something that is not a token; never shows its output."""

    def __init__(self, message: str) -> None:
        super().__init__(Problem(COMMAND_ENV, message))


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    expires_at: float  # seconds since the epoch
    refresh_at: float  # when a fresh one is asked for (epoch seconds)

    @classmethod
    def lasting(cls, value: str, expires_at: float, now: float) -> Token:
        return cls(value, expires_at, now + max(0.0, expires_at - now) * REFRESH_AT)


def parse_output(stdout: str, ttl: float, now: float) -> Token:
    """The command's output as a token (see the module's docstring for the two forms)."""
    text = stdout.strip()
    if not text:
        raise AuthCommandError("the command printed nothing; it must print a token or "
                               '{"token": ..., "expiresAt": ...}')
    if not text.startswith("{"):
        if len(text.split()) != 1:
            raise AuthCommandError("the command printed more than one word; print the bare token, or JSON")
        return Token.lasting(text, now + ttl, now)
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise AuthCommandError("the command's output starts with '{' but is not JSON") from None
    token = data.get("token") if isinstance(data, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise AuthCommandError('the command\'s JSON has no "token" string')
    return Token.lasting(token.strip(), _expiry(data, ttl, now), now)


def _expiry(data: Mapping[str, object], ttl: float, now: float) -> float:
    at, within = data.get("expiresAt"), data.get("expiresIn")
    if isinstance(within, int | float) and not isinstance(within, bool):
        return now + float(within)
    if isinstance(at, int | float) and not isinstance(at, bool):
        return float(at)
    if isinstance(at, str):
        try:
            return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise AuthCommandError(f'"expiresAt" is not an ISO 8601 time: {at[:40]!r}') from None
    if at is None and within is None:
        return now + ttl
    raise AuthCommandError('"expiresAt" must be an ISO 8601 time or epoch seconds, "expiresIn" seconds')


class CommandToken:
    """The coordinator's token: made by the command, made again once it is due. Thread-safe;
    ``on_new`` sees every new token first (the redactors learn it before anyone uses it)."""

    def __init__(self, command: str, ttl: float = DEFAULT_TTL) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise AuthCommandError("the variable is set but empty")
        self.ttl = ttl
        self.issued: list[str] = []  # every token made: all are redacted, to the end of the run
        self._listeners: list[Callable[[Token], None]] = []
        self._token: Token | None = None
        self._lock = threading.Lock()

    def on_new(self, listener: Callable[[Token], None]) -> None:
        with self._lock:
            self._listeners.append(listener)
            if self._token is not None:
                listener(self._token)

    def due(self) -> bool:
        token = self._token
        return token is None or time.time() >= token.refresh_at

    def fresh(self) -> Token:
        """The token, made again first when it is due; raises :class:`AuthCommandError`."""
        with self._lock:
            if self._token is None or time.time() >= self._token.refresh_at:
                self._token = self._run()
                self.issued.append(self._token.value)
                for listener in self._listeners:
                    listener(self._token)
            return self._token

    def current(self) -> str:
        return self.fresh().value

    def _run(self) -> Token:
        try:
            done = subprocess.run(self.argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT, check=False)
        except FileNotFoundError:
            raise AuthCommandError(f"the command {self.argv[0]!r} is not found on PATH") from None
        except subprocess.TimeoutExpired:
            raise AuthCommandError(f"the command did not finish within {COMMAND_TIMEOUT:g}s") from None
        if done.returncode != 0:
            # Its stderr is not shown: a failing auth command may well print what it was given.
            raise AuthCommandError(f"the command exited with status {done.returncode}")
        return parse_output(done.stdout, self.ttl, time.time())


def command_token(environ: Mapping[str, str] | None = None) -> CommandToken | None:
    """The token ``MST_LLM_AUTH_COMMAND`` names in this (the coordinator's) environment, or None."""
    env = os.environ if environ is None else environ
    command = env.get(COMMAND_ENV)
    if command is None:
        return None
    raw_ttl = env.get(TTL_ENV)
    try:
        ttl = float(raw_ttl) if raw_ttl is not None else DEFAULT_TTL
        if ttl <= 0:
            raise ValueError
    except ValueError:
        raise UserError(Problem(TTL_ENV, f"expected a number of seconds above 0, got {raw_ttl!r}")) from None
    return CommandToken(command, ttl)


class PushedToken:
    """A grade worker's token: the latest the coordinator pushed. One that is past its refresh
    point without a fresher one asks (``ask``: send ``need-tokens``) and waits a little for it."""

    WAIT: Final = 30.0

    def __init__(self, token: Token, ask: Callable[[], None]) -> None:
        self._token = token
        self._ask = ask
        self._changed = threading.Condition()
        self._asked: Token | None = None

    def update(self, token: Token) -> None:
        with self._changed:
            self._token = token
            self._changed.notify_all()

    def current(self) -> str:
        with self._changed:
            token = self._token
            now = time.time()
            if now < token.refresh_at:
                return token.value
            if self._asked is not token:  # once per token, however many judges wait for it
                self._asked = token
                self._ask()
            left = token.expires_at - now
            self._changed.wait_for(lambda: self._token is not token, timeout=min(self.WAIT, left) if left > 0
                                   else self.WAIT)
            return self._token.value
