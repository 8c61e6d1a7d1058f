"""Code judges: resolving them to an identity, loading them, and the views they are given.

A judge is resolved once, on the coordinator (docs/shards.md, "The coordinator resolves"). Its
*identity* digests everything that decides its verdicts — the resolved definition and the
version of the code — so ``mst grade --resume`` can keep a verdict exactly when the judge that
gave it is unchanged. For an entry-point plugin the version is its distribution's version (what
a shard worker must also have installed); for ``module:function`` code next to the eval it is a
digest of the module's source file, because such code has no version of its own.

Judges receive a :class:`TrialView`, a read-only view of one trial. Reading a transcript can
cost milliseconds while an assertion-only trial must grade in microseconds, so the view reads
the transcript file only when something touches :attr:`TrialView.events` or
:attr:`TrialView.tool_calls`.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import math
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from mst import endings
from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.plugins import JUDGES, dist_version, entry_points
from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.session.events import ASSISTANT_MESSAGE, Event
from mst.session.io import TranscriptError, load_transcript
from mst.session.lookups import SOURCE_NATIVE, SessionLookups, ToolCall, create_session_lookups, is_main_agent

if TYPE_CHECKING:
    import importlib.metadata  # imported by mst.config.plugins for a plugin judge only

ENTRY_POINT_GROUP: Final = JUDGES.name
IDENTITY_VERSION: Final = "mst.judge/v1"
# A pairwise judge has no threshold; a fixed value keeps ResolvedJudge uniform and its identity stable.
PAIRWISE_THRESHOLD: Final = 0.5

Preference = Literal["A", "B", "tie"]


class JudgeLoadError(Exception):
    """A judge that cannot be imported or is not callable; the config loader reports it."""

    def __init__(self, judge_id: str, target: str, why: str) -> None:
        super().__init__(f"judge {judge_id!r} ({target}): {why}")
        self.judge_id = judge_id
        self.target = target
        self.why = why


class JudgeReturnError(TypeError):
    """A judge returned something that is not a verdict; becomes a grading error."""


class TranscriptUnavailable(TranscriptError):
    """The trial has no transcript, so evidence from it is unavailable (never assumed empty)."""


# ---------------------------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a judge decided about one trial. Judges may return one directly."""

    passed: bool
    score: float | None = None
    reason: str | None = None
    usage: Mapping[str, Any] | None = None


def to_verdict(value: Any, threshold: float) -> Verdict:
    """Normalise every return form a judge may use into a :class:`Verdict`.

    Accepted: ``bool``; a number (a score, passing iff ``score >= threshold``); a
    ``(passed_or_score, reason)`` tuple; a dict with ``passed``/``score``/``reason``/``usage``;
    a :class:`Verdict`. Anything else is a :class:`JudgeReturnError`, so a judge with a bug is a
    grading error rather than a silently failed (or passed) trial.
    """
    cls = value.__class__
    if cls is tuple and len(value) == 2 and value[0].__class__ is bool and (
            value[1] is None or value[1].__class__ is str):  # (passed, reason): the common form, checked as below
        return Verdict(value[0], None, value[1])
    if isinstance(value, Verdict):
        return value
    if cls is bool:
        return Verdict(value)
    if isinstance(value, int | float):
        number = _finite(value)
        return Verdict(number >= threshold, number)
    if isinstance(value, tuple):
        if len(value) != 2 or not (value[1] is None or isinstance(value[1], str)):
            raise JudgeReturnError("a judge returning a tuple must return (passed_or_score, reason)")
        if not isinstance(value[0], bool | int | float):
            raise JudgeReturnError("the first item of a judge's tuple must be a bool or a number")
        first = to_verdict(value[0], threshold)
        return Verdict(first.passed, first.score, value[1])
    if isinstance(value, dict):
        unknown = set(value) - {"passed", "score", "reason", "usage"}
        if unknown:
            raise JudgeReturnError(
                "a judge's dict may hold passed, score, reason and usage; "
                f"unknown: {', '.join(sorted(unknown))}"
            )
        passed: Any = value.get("passed")
        score: Any = value.get("score")
        reason: Any = value.get("reason")
        usage: Any = value.get("usage")
        if passed is not None and not isinstance(passed, bool):
            raise JudgeReturnError("'passed' must be a boolean")
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise JudgeReturnError("'score' must be a number")
            score = _finite(score)
        if reason is not None and not isinstance(reason, str):
            raise JudgeReturnError("'reason' must be a string")
        if usage is not None and not isinstance(usage, dict):
            raise JudgeReturnError("'usage' must be an object")
        if passed is None:
            if score is None:
                raise JudgeReturnError("a judge's dict needs 'passed' or 'score'")
            passed = score >= threshold
        return Verdict(passed, None if score is None else float(score), reason, usage)
    raise JudgeReturnError(
        f"a judge returned {type(value).__name__}; "
        "expected bool, a score, (passed, reason), a dict or a Verdict"
    )


def to_preference(value: Any) -> tuple[Preference, str | None]:
    """Normalise a pairwise judge's return: ``"A"``/``"B"``/``"tie"``, a tuple with a reason, or a dict."""
    reason: Any = None
    if isinstance(value, tuple):
        if len(value) != 2:
            raise JudgeReturnError("a pairwise judge returning a tuple must return (preference, reason)")
        value, reason = value
    elif isinstance(value, dict):
        unknown = set(value) - {"preference", "reason"}
        if unknown or "preference" not in value:
            raise JudgeReturnError("a pairwise judge's dict must hold 'preference' (and optionally 'reason')")
        value, reason = value["preference"], value.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise JudgeReturnError("a pairwise judge's reason must be a string")
    if isinstance(value, str):
        normal = value.strip().lower()
        if normal == "a":
            return "A", reason
        if normal == "b":
            return "B", reason
        if normal == "tie":
            return "tie", reason
    raise JudgeReturnError(f"a pairwise judge must return 'A', 'B' or 'tie', got {value!r}")


def _finite(value: float) -> float:
    score = float(value)
    if not math.isfinite(score):
        raise JudgeReturnError(f"a judge's score must be a finite number, got {value!r}")
    return score


# ---------------------------------------------------------------------------------------------
# Views given to judges


class CaseView:
    """The case as a judge sees it: its task and what is expected, nothing of the run."""

    __slots__ = ("expected", "id", "metadata", "prompt", "trials")

    def __init__(self, id: str, prompt: str, expected: Any, metadata: Mapping[str, Any], trials: int) -> None:
        self.id = id
        self.prompt = prompt
        self.expected = expected
        self.metadata = metadata
        self.trials = trials

    @classmethod
    def of(cls, case: ResolvedCase) -> CaseView:
        prompt, expected, metadata = case.task()  # one decode of the packed task, not three
        return cls(case.id, prompt, expected, metadata, case.trials)

    def __repr__(self) -> str:
        return f"CaseView(id={self.id!r})"


_PLAIN_MAPPINGS: Final = (dict, MappingProxyType)  # an isinstance against Mapping costs an ABC check


class TrialView:
    """One trial as an assertion or a judge sees it.

    ``transcript`` is the transcript file (read on first use of :attr:`events`), the events
    already in memory (the collector has them), or ``None`` when the trial has none — then
    touching :attr:`events` raises :class:`TranscriptUnavailable`, because missing evidence must
    not read as "no tool was called".
    """

    __slots__ = (
        "_events",
        "_lookups",
        "_path",
        "_plain",
        "_text",
        "_tool_calls",
        "answer",
        "artifacts_dir",
        "case_id",
        "ending",
        "expected",
        "metadata",
        "prompt",
        "trial",
        "usage",
        "variant",
    )

    def __init__(
        self,
        *,
        variant: str,
        case_id: str,
        trial: int,
        answer: str | None,
        ending: Mapping[str, Any] | endings.Ending,
        transcript: Path | str | Sequence[Event] | None,
        usage: Mapping[str, Any] | None = None,
        artifacts_dir: Path | None = None,
        expected: Any = None,
        metadata: Mapping[str, Any] | None = None,
        prompt: str | None = None,
    ) -> None:
        self.variant = variant
        self.case_id = case_id
        self.trial = trial
        self.answer = answer
        self.ending: Mapping[str, Any] = (  # a dict or the records' read-only view: no ABC check
            ending if ending.__class__ in _PLAIN_MAPPINGS or isinstance(ending, Mapping) else endings.to_json(ending)
        )
        self.usage: Mapping[str, Any] = usage if usage is not None else {}
        self.artifacts_dir = artifacts_dir
        self.expected = expected
        self.metadata: Mapping[str, Any] = metadata if metadata is not None else {}
        self.prompt = prompt
        self._tool_calls: list[dict[str, Any]] | None = None
        self._lookups: SessionLookups | None = None
        self._text: str | None = None
        self._plain: bytes | None = None  # the file's bytes, when plain JSONL: see take_plain
        # A file (a str, as attempt records give it, tested first), read when first needed.
        if transcript is None or transcript.__class__ is str or isinstance(transcript, Path | str):
            self._path: Path | str | None = transcript
            self._events: Sequence[Event] | None = None
        else:
            self._path = None
            self._events = transcript

    def unread(self) -> TrialView:
        """The same trial with nothing read from its transcript yet: a second judge of it (the
        pairwise comparison after the trial's grading) without holding the first one's events."""
        transcript = self._path if self._path is not None else self._events
        return TrialView(variant=self.variant, case_id=self.case_id, trial=self.trial, answer=self.answer,
                         ending=self.ending, transcript=transcript, usage=self.usage,
                         artifacts_dir=self.artifacts_dir, expected=self.expected, metadata=self.metadata,
                         prompt=self.prompt)

    @property
    def transcript_path(self) -> Path | None:
        """The transcript file, when the trial was given one."""
        return None if self._path is None else Path(self._path)

    @classmethod
    def of(
        cls,
        case: ResolvedCase,
        *,
        variant: str,
        trial: int,
        answer: str | None,
        ending: Mapping[str, Any] | endings.Ending,
        transcript: Path | str | Sequence[Event] | None,
        usage: Mapping[str, Any] | None = None,
        artifacts_dir: Path | None = None,
    ) -> TrialView:
        """A view of a trial of ``case``, taking expected, metadata and prompt from the case (one
        decode of its packed task, not one per field: a view is made per trial graded)."""
        prompt, expected, metadata = case.task()
        return cls(
            variant=variant, case_id=case.id, trial=trial, answer=answer, ending=ending,
            transcript=transcript, usage=usage, artifacts_dir=artifacts_dir,
            expected=expected, metadata=metadata, prompt=prompt,
        )

    @property
    def is_trial(self) -> bool:
        """False for an infrastructure failure, which is never graded."""
        return self.ending.get("kind") == "trial"

    @property
    def events(self) -> Sequence[Event]:
        """The transcript's canonical events, read from the file on first access."""
        if self._events is None:
            if self._path is None:
                raise TranscriptUnavailable(
                    f"trial {self.variant}/{self.case_id}/{self.trial} has no transcript"
                )
            self._events, self._plain = load_transcript(self._path)
        return self._events

    def take_plain(self) -> bytes | None:
        """The transcript file's bytes as :attr:`events` read them, when they are plain JSONL
        (None when not read, or not plain), handed over once: the report copies them into its
        chunks instead of reading the file again (docs/report.md). Grading keeps no copy."""
        plain, self._plain = self._plain, None
        return plain

    def has_events(self, events: Sequence[Event]) -> bool:
        """``events`` are this view's own events (already read), not a copy (a redacted one)."""
        return events is self._events

    @property
    def lookups(self) -> SessionLookups:
        """The session lookups (:mod:`mst.session.lookups`), built once: the one definition of a
        tool call that assertions, judges and the deterministic graders share."""
        if self._lookups is None:
            self._lookups = create_session_lookups(self.events)
        return self._lookups

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The agent's tool calls, from the session lookups (:func:`tool_call_records`).

        A call that never completed counts as failed. Events of other provenance phases (judges,
        detection) are not the agent's and are left out; a call mst rejected before any server
        saw it is listed with ``rejected: true``.
        """
        if self._tool_calls is None:
            self._tool_calls = tool_call_records(self.events, self.lookups)
        return self._tool_calls

    @property
    def transcript_text(self) -> str:
        """The text of the agent's assistant messages, one per line (``field: transcript``)."""
        if self._text is None:
            parts: list[str] = []
            for event in self.events:
                if event.get("type") == ASSISTANT_MESSAGE and is_main_agent(event):
                    parts.append(_content_text(event["data"].get("content")))
            self._text = "\n".join(parts)
        return self._text

    def __repr__(self) -> str:
        return f"TrialView({self.variant}/{self.case_id}/{self.trial})"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content blocks as providers write them: [{"type": "text", "text": ...}, ...]
        return "".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content
        )
    return str(content)


def tool_call_records(session: Sequence[Event], lookups: SessionLookups) -> list[dict[str, Any]]:
    """The session lookups' tool calls as the plain records judges and assertions read.

    Each is ``{id, name, server, qualified, input, success, output | error, durationMs,
    rejected}``: ``name`` as the client wrote it, ``qualified`` the lookups' one spelling
    (``server__tool``), ``output`` or ``error`` from the completion event. A call that never
    completed counts as failed; ``rejected`` is true for a call mst refused before any server saw
    it (its events' data say ``"rejected": true``).
    """
    return [_tool_call_record(session, call) for call in lookups.tool_calls]


def _tool_call_record(session: Sequence[Event], call: ToolCall) -> dict[str, Any]:
    first = session[call.start] if call.start is not None else session[call.position]
    written = first.get("data", {}).get("toolName") if call.source == SOURCE_NATIVE else None
    server = call.server
    name = written if isinstance(written, str) and written else (
        call.name[len(server) + 2:] if server and call.name.startswith(f"{server}__") else call.name)
    record: dict[str, Any] = {"id": call.call_id, "name": name, "server": server, "qualified": call.name,
                              "input": call.arguments, "success": call.success}
    done = session[call.end].get("data", {}) if call.end is not None and call.source == SOURCE_NATIVE else {}
    if not call.finished:
        record["error"] = "unfinished"
    elif call.success:
        record["output"] = done.get("output")
    else:
        record["error"] = done.get("error")
    record["durationMs"] = call.duration_ms
    record["rejected"] = call.rejected
    return record


# ---------------------------------------------------------------------------------------------
# Resolving and loading


def _canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise ValueError(f"judge options must be JSON data: {exc}") from None


def judge_identity(*, id: str, target: str, source: str, options: Mapping[str, Any], threshold: float,
                   version: str, kind: str = "judge") -> str:
    """sha256 over canonical JSON of the resolved definition and the code's version."""
    definition = {
        "schema": IDENTITY_VERSION, "kind": kind, "id": id, "target": target, "source": source,
        "options": dict(options), "threshold": threshold, "version": version,
    }
    return "sha256:" + hashlib.sha256(_canonical(definition)).hexdigest()


_PATH_LOCK = threading.Lock()


def _ensure_on_path(base_dir: Path, module_name: str) -> None:
    """Make ``base_dir`` win the import of ``module_name``.

    Evals commonly name their judge module ``judges``: when one process loads judges from two
    evals (tests, a long-lived worker), the module cached from the other eval's directory must
    not answer for this one. So the eval's directory goes first on ``sys.path``, and a module of
    the same top-level name loaded from elsewhere is dropped from the cache.
    """
    root = base_dir.resolve()
    entry = str(root)
    top = module_name.split(".")[0]
    with _PATH_LOCK:
        if sys.path[:1] != [entry]:
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
        if not ((root / f"{top}.py").is_file() or (root / top / "__init__.py").is_file()):
            return
        loaded = sys.modules.get(top)
        file = getattr(loaded, "__file__", None) if loaded is not None else None
        if loaded is None or (file is not None and Path(file).resolve().is_relative_to(root)):
            return
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]


def _split_target(judge_id: str, target: str) -> tuple[str, str]:
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise JudgeLoadError(judge_id, target, "expected module:function")
    return module, attr


def _import_code(judge_id: str, target: str, base_dir: Path | None) -> tuple[Callable[..., Any], str]:
    """Import ``module:function`` (from ``base_dir`` first) → (callable, digest of its source file)."""
    module_name, attr = _split_target(judge_id, target)
    if base_dir is not None:
        _ensure_on_path(base_dir, module_name)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        why = f"cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        raise JudgeLoadError(judge_id, target, why) from exc
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise JudgeLoadError(judge_id, target, f"module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise JudgeLoadError(judge_id, target, f"{attr!r} is not callable")
    return fn, _module_digest(judge_id, target, module)


def _module_digest(judge_id: str, target: str, module: Any) -> str:
    file = getattr(module, "__file__", None)
    if file is None:
        return f"module:{module.__name__}"  # a built-in module: its version is Python's
    try:
        return "sha256:" + hashlib.sha256(Path(file).read_bytes()).hexdigest()
    except OSError as exc:
        raise JudgeLoadError(judge_id, target, f"cannot read the judge's source file: {exc}") from exc


def _entry_point(judge_id: str, name: str) -> importlib.metadata.EntryPoint:
    matches = entry_points(JUDGES, name)
    if not matches:
        why = f"no entry point {name!r} in group {ENTRY_POINT_GROUP} is installed"
        raise JudgeLoadError(judge_id, name, why)
    if len(matches) > 1:
        dists = sorted({dist_version(ep) for ep in matches})
        raise JudgeLoadError(judge_id, name, f"entry point {name!r} is provided by several packages: {dists}")
    return matches[0]


def _import_plugin(judge_id: str, name: str) -> tuple[Callable[..., Any], str]:
    ep = _entry_point(judge_id, name)
    try:
        fn = ep.load()
    except Exception as exc:
        why = f"cannot load entry point {ep.value!r}: {type(exc).__name__}: {exc}"
        raise JudgeLoadError(judge_id, name, why) from exc
    if not callable(fn):
        raise JudgeLoadError(judge_id, name, f"entry point {ep.value!r} is not callable")
    return fn, dist_version(ep)


# Judge kinds other than code: the config field that selects each, and the module that runs it
# (``resolve(cfg)``, ``judge(judge, trial, case, access)``, ``pairwise(judge, case, a, b, access)``,
# ``needs(judge)``: registered for the preflight by :mod:`mst.grading.preflight`).
# A resolved judge's ``source`` is its kind's name.
JUDGE_KINDS: Final[dict[str, str]] = {"llm": "mst.grading.llm_judge", "agentic": "mst.grading.agentic_judge"}


def kind_module(source: str) -> Any | None:
    """The module running judges of ``source``'s kind, or None for code and plugin judges."""
    name = JUDGE_KINDS.get(source)
    return importlib.import_module(name) if name is not None else None


def resolve_judge(cfg: JudgeConfig | PairwiseConfig, base_dir: Path) -> ResolvedJudge:
    """Load a configured judge once and give it its identity; raises :class:`JudgeLoadError`."""
    for kind in JUDGE_KINDS:
        if getattr(cfg, kind, None) is not None:
            resolved: ResolvedJudge = kind_module(kind).resolve(cfg)  # type: ignore[union-attr]
            return resolved
    kind = "pairwise" if isinstance(cfg, PairwiseConfig) else "judge"
    threshold = cfg.threshold if isinstance(cfg, JudgeConfig) else PAIRWISE_THRESHOLD
    if cfg.code is not None:
        source, target = "code", cfg.code
        fn, version = _import_code(cfg.id, target, base_dir)
    elif cfg.plugin is not None:
        source, target = "plugin", cfg.plugin
        fn, version = _import_plugin(cfg.id, target)
    else:  # the config model forbids this; kept so a hand-built config fails clearly
        raise JudgeLoadError(cfg.id, "?", "give exactly one of 'code' or 'plugin'")
    try:
        identity = judge_identity(id=cfg.id, target=target, source=source, options=cfg.options,
                                  threshold=threshold, version=version, kind=kind)
    except ValueError as exc:
        raise JudgeLoadError(cfg.id, target, str(exc)) from None
    judge = ResolvedJudge(id=cfg.id, target=target, source=source, options=dict(cfg.options),
                          threshold=threshold, version=version, identity=identity, secrets=tuple(cfg.secrets))
    with _CACHE_LOCK:
        _CALLABLES[identity] = fn
    return judge


def _wants_options(fn: Callable[..., Any], fixed: int) -> bool:
    """Whether ``fn`` takes ``options`` after its ``fixed`` arguments (1: trial; 3: case, a, b).

    Decided once per judge, so a judge may be written ``f(trial)`` or ``f(trial, options)``.
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) > fixed


_CALLABLES: dict[str, Callable[..., Any]] = {}
_ARITY: dict[tuple[str, int], bool] = {}
_CACHE_LOCK = threading.Lock()


def load_callable(judge: ResolvedJudge, base_dir: Path | None = None) -> Callable[..., Any]:
    """The judge's callable, loaded once per identity.

    In a process that did not resolve the judge (a shard worker), the code is imported here and
    its version checked against the resolved one, so a worker never grades with other code than
    the coordinator resolved. ``base_dir`` is where ``module:function`` code lives.
    """
    cached = _CALLABLES.get(judge.identity)
    if cached is not None:
        return cached
    if judge.source == "code":
        fn, version = _import_code(judge.id, judge.target, base_dir)
    elif judge.source == "plugin":
        fn, version = _import_plugin(judge.id, judge.target)
    else:
        raise JudgeLoadError(judge.id, judge.target, f"unknown judge source {judge.source!r}")
    if version != judge.version:
        raise JudgeLoadError(
            judge.id, judge.target,
            f"the judge's code changed since it was resolved (version {version}, resolved {judge.version})",
        )
    with _CACHE_LOCK:
        _CALLABLES[judge.identity] = fn
    return fn


def prepared_call(
    judge: ResolvedJudge, *, pairwise: bool = False, base_dir: Path | None = None
) -> tuple[Callable[..., Any], bool]:
    """(callable, whether to pass ``options``), for the grading sources; both cached."""
    fn = load_callable(judge, base_dir)
    key = (judge.identity, 3 if pairwise else 1)
    wants = _ARITY.get(key)
    if wants is None:
        wants = _ARITY[key] = _wants_options(fn, key[1])
    return fn, wants
