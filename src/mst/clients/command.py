"""The ``command`` client: run any command line with the prompt and read its answer.

For agents mst does not drive itself (a CLI agent, a script around an SDK, another harness).
The command gets the prompt in its argv (``{prompt}``) or on stdin (``stdin: true``), runs in
the attempt's artifacts directory (files it writes there are the attempt's artifacts), and
answers on stdout or in a file. It may also write a JSONL transcript in the canonical format
(docs/graders.md, "The contract"), which becomes the attempt's transcript.

Secrets (from ``--secrets-file``) reach the command through its environment only, never its
argv, and are removed from any of its output that ends up in an ending's detail.

Endings (docs/endings.md), decided here:

- the command does not exist or is not executable → ``Infrastructure("client-app", ...,
  retryable=False)``: the eval's setup must change.
- the command is killed by a signal (a crash, the OOM killer) → ``client-app``, retryable.
- the command exits non-zero → trial ``client-error`` (the client ran and failed: that counts).
- ``timeLimitSeconds`` passes → the process group is killed; trial ``time-limit``.
- a configured transcript or answer file that is missing or unreadable → ``client-app``, retryable
  (mst could not read the client's output).

On cancellation (mst's deadline) the command's whole process group is terminated, then killed,
so nothing it started outlives the attempt; the same happens to anything it leaves running
after it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from mst.clients.base import AttemptOutcome, AttemptRequest
from mst.config.models import VariantConfig
from mst.endings import COMPLETED, Ending, Infrastructure, Trial, to_json
from mst.session.events import ASSISTANT_MESSAGE, MODEL_REQUEST, SESSION_FORMAT, SESSION_RESULT, USER_MESSAGE
from mst.session.io import TranscriptError, read_transcript
from mst.session.redact import Redactor

_STRICT = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)
_DETAIL_TAIL = 800
_KILL_GRACE_S = 2.0


class AnswerFile(BaseModel):
    """Read the answer from a file the command writes."""

    model_config = _STRICT

    file: str = Field(
        min_length=1,
        description="Path template, relative to the attempt's artifacts directory "
        "(placeholders as in `command`).",
    )


class CommandSettings(BaseModel):
    """Settings of the ``command`` client (a variant's ``settings``).

    Placeholders in ``command``, ``transcript`` and ``answerFrom.file``: ``{prompt}`` (argv only),
    ``{case}``, ``{variant}``, ``{trial}``, ``{try}``, ``{model}``, ``{artifacts}`` (the attempt's
    artifacts directory). The command also gets ``MST_CASE_ID``, ``MST_VARIANT``, ``MST_TRIAL``,
    ``MST_TRY``, ``MST_MODEL``, ``MST_ARTIFACTS_DIR`` and ``MST_TRANSCRIPT`` (when set) in its
    environment, with the secrets.
    """

    model_config = _STRICT

    command: list[str] = Field(
        min_length=1, description="argv of the command; `{prompt}` is replaced by the case's prompt."
    )
    stdin: bool = Field(
        default=False, description="Send the prompt on stdin (as well as wherever argv has `{prompt}`)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cwd: str | None = Field(
        default=None,
        description="Working directory, relative to the eval file; default: the attempt's artifacts "
        "directory.",
    )
    transcript: str | None = Field(
        default=None,
        description="Path template (relative to the artifacts directory) of a canonical JSONL transcript "
        "the command writes; it becomes the attempt's transcript.",
    )
    answerFrom: Literal["stdout"] | AnswerFile = Field(
        default="stdout", description="Where the answer is: `stdout` (stripped) or `{file: path}`."
    )
    timeLimitSeconds: float | None = Field(
        default=None, gt=0, description="The client's own time budget; passing it is a time-limit trial."
    )


def _redact(text: str, secrets: Mapping[str, str]) -> str:
    return Redactor.of(secrets).text(text)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace").strip()
    return text if len(text) <= _DETAIL_TAIL else "…" + text[-_DETAIL_TAIL:]


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Terminate the process group, give it a moment, then kill what is left."""
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
    except TimeoutError:
        pass
    _kill_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()


class CommandClient:
    """The ``command`` client kind (entry point ``command`` in group ``mst.clients``)."""

    settings_model: ClassVar[type[BaseModel]] = CommandSettings

    def __init__(self, variant: VariantConfig, settings: Any, base_dir: Path) -> None:
        if not isinstance(settings, CommandSettings):
            settings = CommandSettings.model_validate(settings)
        self.settings: CommandSettings = settings
        self.variant = variant
        self.base_dir = base_dir

    async def aclose(self) -> None:
        return None

    def _fill(self, template: str, request: AttemptRequest, *, with_prompt: bool) -> str:
        if "{" not in template:
            return template
        values = {
            "{case}": request.case_id, "{variant}": self.variant.id, "{trial}": str(request.trial),
            "{try}": str(request.try_number), "{model}": self.variant.model or "",
            "{artifacts}": str(request.artifacts_dir),
        }
        if with_prompt:
            values["{prompt}"] = request.prompt
        for key, value in values.items():
            template = template.replace(key, value)
        return template

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        settings, rec = self.settings, request.transcript
        argv = [self._fill(a, request, with_prompt=True) for a in settings.command]
        # Absolute: the command runs with its cwd there, so a relative run dir would point elsewhere.
        artifacts = request.artifacts_dir.absolute()
        artifacts.mkdir(parents=True, exist_ok=True)
        transcript_path = (
            artifacts / self._fill(settings.transcript, request, with_prompt=False)
            if settings.transcript else None
        )
        env = dict(os.environ)
        env.update(settings.env)
        env.update({
            "MST_CASE_ID": request.case_id, "MST_VARIANT": self.variant.id, "MST_TRIAL": str(request.trial),
            "MST_TRY": str(request.try_number), "MST_MODEL": self.variant.model or "",
            "MST_ARTIFACTS_DIR": str(artifacts),
        })
        if transcript_path is not None:
            env["MST_TRANSCRIPT"] = str(transcript_path)
        env.update(request.secrets)
        cwd = artifacts if settings.cwd is None else self.base_dir / settings.cwd

        ending: Ending
        answer: str | None = None
        stdout = b""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, start_new_session=True,
                stdin=asyncio.subprocess.PIPE if settings.stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            what = "not found" if isinstance(exc, FileNotFoundError) else "not executable"
            if isinstance(exc, FileNotFoundError) and not Path(cwd).is_dir():
                what = f"could not start: its working directory {str(cwd)!r} does not exist"
            ending = Infrastructure("client-app", f"command {argv[0]!r} {what}", False)
            return self._finish(request, ending, None, {}, started, own_events=True)

        ending, stdout = await self._run(proc, request)
        events: list[dict[str, Any]] | None = None
        if transcript_path is not None:
            try:
                events = [e for e in read_transcript(transcript_path) if e.get("type") != SESSION_FORMAT]
            except (TranscriptError, OSError) as exc:
                if ending == COMPLETED:
                    ending = Infrastructure(
                        "client-app", f"the command's transcript could not be read: {exc}", True)
        if ending == COMPLETED:
            if isinstance(settings.answerFrom, AnswerFile):
                path = artifacts / self._fill(settings.answerFrom.file, request, with_prompt=False)
                try:
                    answer = path.read_text(encoding="utf-8", errors="replace").strip()
                except OSError as exc:
                    why = f"the command's answer file could not be read: {type(exc).__name__}: {path}"
                    ending = Infrastructure("client-app", why, True)
            else:
                answer = stdout.decode("utf-8", errors="replace").strip()
        usage: dict[str, int] = {}
        if events is not None:
            rec.extend(events)
            usage = _usage(events)
        return self._finish(request, ending, answer, usage, started, own_events=events is None)

    async def _run(self, proc: asyncio.subprocess.Process, request: AttemptRequest) -> tuple[Ending, bytes]:
        settings = self.settings
        data = request.prompt.encode() if settings.stdin else None
        try:
            if settings.timeLimitSeconds is None:
                stdout, stderr = await proc.communicate(data)
            else:
                try:
                    async with asyncio.timeout(settings.timeLimitSeconds):
                        stdout, stderr = await proc.communicate(data)
                except TimeoutError:
                    await _stop(proc)
                    budget = settings.timeLimitSeconds
                    detail = f"the command ran past its time budget of {budget:g} s (timeLimitSeconds)"
                    return Trial("time-limit", detail), b""
        except BaseException:
            # Cancelled (mst's deadline) or failed while reading: nothing it started may survive.
            await asyncio.shield(_stop(proc))
            raise
        # Whatever the command left running in its session (a daemon it started) goes with it.
        _kill_group(proc.pid, signal.SIGKILL)
        code = proc.returncode
        assert code is not None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            why = f"command {settings.command[0]!r} was killed by {name}"
            return Infrastructure("client-app", why, True), stdout
        if code != 0:
            tail = _redact(_tail(stderr), request.secrets)
            detail = f"command exited with status {code}" + (f": {tail}" if tail else "")
            return Trial("client-error", detail), stdout
        return COMPLETED, stdout

    def _finish(
        self, request: AttemptRequest, ending: Ending, answer: str | None, usage: dict[str, int],
        started: float, *, own_events: bool,
    ) -> AttemptOutcome:
        rec = request.transcript
        if own_events:
            # No transcript of its own: record what mst saw (the prompt it gave, the answer it read).
            rec.emit(USER_MESSAGE, {"content": request.prompt})
            if answer is not None:
                rec.emit(ASSISTANT_MESSAGE, {"content": answer})
        duration_ms = int((time.monotonic() - started) * 1000)
        rec.emit(SESSION_RESULT, {
            "answer": answer,
            "outcome": ending.outcome if isinstance(ending, Trial) else "infrastructure",
            "ending": to_json(ending),
            "usage": usage,
            "durationMs": duration_ms,
        })
        return AttemptOutcome(ending, answer, usage, {"durationMs": duration_ms})


def _usage(events: list[dict[str, Any]]) -> dict[str, int]:
    """Token usage summed from the command's ``model.request`` events (empty when it has none)."""
    inp = out = 0
    seen = False
    for e in events:
        if e.get("type") == MODEL_REQUEST:
            data = e["data"]
            i, o = data.get("inputTokens"), data.get("outputTokens")
            if isinstance(i, int) and isinstance(o, int):
                inp, out, seen = inp + i, out + o, True
    return {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out} if seen else {}
