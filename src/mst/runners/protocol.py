"""The shard channel protocol ``mst.shard/v1``: every message a worker and a coordinator exchange.

One JSON object per line over the worker's stdin (coordinator → worker) and stdout (worker →
coordinator). This module is the only definition of those lines, so both ends parse and write
them with the same models, and a line that is not one of them is refused at the edge.

Worker → coordinator: ``hello``, ``need-tokens``, ``heartbeat``, ``trial`` (collect), ``graded``
(grade), ``lease`` / ``release`` / ``hold`` (a grade worker's judge slots), ``error``, ``done``.
Coordinator → worker: ``bundle`` (only for runners without a shared disk, so files move through
the channel), ``tokens``, ``granted``, ``cancel``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

PROTOCOL: Final = "mst.shard/v1"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)


class FileRef(_Message):
    """A result file, relative to the worker's results directory.

    ``data`` (base64) carries the content when the runner has no shared disk; otherwise the
    coordinator copies the file from the worker's results directory.
    """

    path: str
    data: str | None = None


class PluginVersion(_Message):
    """An installed plugin as an entry point and its distribution (``Name==version`` or None)."""

    group: str
    name: str
    dist: str | None


class Machine(_Message):
    hostname: str
    platform: str
    python: str
    cpus: int


class TrialKey(_Message):
    """A trial of a case: (variant, case, trial)."""

    kind: Literal["trial"] = "trial"
    variant: str
    case: str
    trial: int


class PairKey(_Message):
    """A case's pairwise comparison of a candidate against the baseline."""

    kind: Literal["pairwise"] = "pairwise"
    candidate: str
    case: str


# --- worker → coordinator ----------------------------------------------------------------------


class Hello(_Message):
    type: Literal["hello"] = "hello"
    protocol: Literal["mst.shard/v1"] = "mst.shard/v1"
    mst_version: str = Field(alias="mstVersion")
    plugins: list[PluginVersion]
    machine: Machine


class NeedTokens(_Message):
    type: Literal["need-tokens"] = "need-tokens"


class Heartbeat(_Message):
    type: Literal["heartbeat"] = "heartbeat"


class TrialDone(_Message):
    """A collected attempt: its (redacted) record and its transcript and artifact files."""

    type: Literal["trial"] = "trial"
    key: TrialKey
    record: dict[str, Any]
    files: list[FileRef]


class Graded(_Message):
    """A trial graded or a case compared: ``graded`` when every grader gave a verdict."""

    type: Literal["graded"] = "graded"
    key: Annotated[TrialKey | PairKey, Field(discriminator="kind")]
    status: Literal["graded", "failed"]
    files: list[FileRef]


class LeaseRequest(_Message):
    """A judge wants a slot of ``provider`` (the eval's ``judgeLimits`` hold across shards)."""

    type: Literal["lease"] = "lease"
    id: int
    provider: str


class LeaseRelease(_Message):
    """The call that held lease ``id`` is over: the slot is free for any shard."""

    type: Literal["release"] = "release"
    id: int


class Hold(_Message):
    """A provider answered 429 with ``retry-after``: no shard starts a call to it for ``seconds``."""

    type: Literal["hold"] = "hold"
    provider: str
    seconds: float = Field(ge=0, le=86_400)


class WorkerError(_Message):
    """The worker cannot go on (an unreadable bundle, a judge preflight): the shard fails."""

    type: Literal["error"] = "error"
    message: str


class Done(_Message):
    type: Literal["done"] = "done"
    graded: int = 0
    failed: int = 0
    collected: int = 0


# --- coordinator → worker ----------------------------------------------------------------------


class BundleMessage(_Message):
    """The bundle directory as a base64 gzip tar, for a worker with no shared disk."""

    type: Literal["bundle"] = "bundle"
    archive: str


class AuthToken(_Message):
    """The gateway token ``MST_LLM_AUTH_COMMAND`` made, with its expiry and refresh point (epoch seconds)."""

    token: str
    expires_at: float = Field(alias="expiresAt")
    refresh_at: float = Field(alias="refreshAt")


class Tokens(_Message):
    """The secrets file's values: the only way a secret reaches a worker. Sent again, unasked,
    whenever the coordinator refreshed the gateway token (``auth``)."""

    type: Literal["tokens"] = "tokens"
    secrets: dict[str, str]
    auth: AuthToken | None = None


class LeaseGranted(_Message):
    """The worker's lease ``id`` is granted: its judge may call the provider now."""

    type: Literal["granted"] = "granted"
    id: int


class Cancel(_Message):
    """Finish the case under way, start no more, then say ``done``."""

    type: Literal["cancel"] = "cancel"


WorkerMessage = Annotated[
    Hello | NeedTokens | Heartbeat | TrialDone | Graded | LeaseRequest | LeaseRelease | Hold | WorkerError | Done,
    Field(discriminator="type"),
]
CoordinatorMessage = Annotated[BundleMessage | Tokens | LeaseGranted | Cancel, Field(discriminator="type")]

_WORKER: TypeAdapter[WorkerMessage] = TypeAdapter(WorkerMessage)
_COORDINATOR: TypeAdapter[CoordinatorMessage] = TypeAdapter(CoordinatorMessage)


def encode(message: _Message) -> str:
    """One line (without its newline), field names as on the wire."""
    return orjson.dumps(message.model_dump(mode="json", by_alias=True, exclude_none=True)).decode()


def message_data(message: _Message) -> Any:
    """The message as JSON data, for a worker to redact before it is encoded."""
    return message.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_worker(line: str) -> WorkerMessage:
    """A worker's line; raises ``ValueError`` (pydantic's or orjson's) when it is not one."""
    return _WORKER.validate_python(orjson.loads(line))


def parse_coordinator(line: str) -> CoordinatorMessage:
    return _COORDINATOR.validate_python(orjson.loads(line))
