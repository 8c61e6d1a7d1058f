"""Custom JavaScript graders, run in a separate restricted Node.js process (docs/graders.md).

A user's script never runs in the mst process. All custom JavaScript graders of one trial go to
one Node process (starting Node is most of the cost of a trivial grader), and each still runs
alone: a fresh ``vm`` context per grader, its own wall-clock budget, its result streamed back as
soon as it is known. When the process dies in the middle (a memory bomb, a kill on timeout or
on an output flood), the grader that was running gets the error and the ones after it are run
again in a new process, so one grader's failure never becomes another's.

The process is contained by the operating system, not by ``vm`` (which only decides what a
script can name): Node's permission model with read access to the staged runtime file alone
and no child processes, worker threads or addons; an empty environment; a fresh temporary
working directory; a new network namespace (``unshare --net``) — where the machine does not
allow one, custom JavaScript is refused with :class:`IsolationUnavailable` rather than run
unisolated; a V8 heap limit and an address-space limit; a wall-clock deadline that kills the
whole process group; 1 MiB caps on stdout and stderr, drained concurrently.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mst.graders.custom.bounded import MIB, Bounded, run_bounded

RUNTIME_JS: Final = Path(__file__).with_name("runtime.js")
MIN_NODE_MAJOR: Final = 20
MAX_MESSAGE_CHARS: Final = 64 * 1024
_VERSION: Final = re.compile(r"^v(\d+)\.")


class IsolationUnavailable(RuntimeError):
    """This machine cannot provide the isolation custom JavaScript requires; nothing was run."""


@dataclass(frozen=True, slots=True)
class JsLimits:
    """Bounds for one grader. ``heap_mb`` is a floor: it grows with the payload (see
    :func:`heap_for`), since a session the grader may not even read must still fit."""

    timeout: float = 5.0
    heap_mb: int = 256
    max_output: int = MIB
    startup: float = 10.0


DEFAULT_JS_LIMITS: Final = JsLimits()


@dataclass(frozen=True, slots=True)
class JsGrader:
    """One grader to run: its id, its inline source and its data-only configuration."""

    id: str
    script: str
    config: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JsOutcome:
    """A grader's value and message, or an error saying why there is no value."""

    value: float | None = None
    message: str = ""
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# What this machine offers (detected once per process)


@functools.cache
def _network_prefix() -> tuple[str, ...] | str:
    """The argv prefix that puts a command in a new, empty network namespace, or why there is none.

    Plain ``unshare --net`` needs CAP_SYS_ADMIN (root); unprivileged users get one through a user
    namespace (``--map-root-user``) where the kernel allows that. Both are tried for real."""
    unshare, true = shutil.which("unshare"), shutil.which("true")
    if unshare is None or true is None:
        return "the 'unshare' command (util-linux) is not installed"
    problems = []
    for prefix in ((unshare, "--net", "--"), (unshare, "--user", "--map-root-user", "--net", "--")):
        try:
            done = subprocess.run([*prefix, true], env={}, capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(str(exc))
            continue
        if done.returncode == 0:
            return prefix
        problems.append(done.stderr.decode(errors="replace").strip() or f"status {done.returncode}")
    return "this machine does not allow a new network namespace (" + "; ".join(problems) + ")"


@functools.cache
def _node_command() -> tuple[str, ...] | str:
    """``node`` with its permission-model flag (``--permission`` on Node ≥ 22.13/23.5, else
    ``--experimental-permission``), found by trying both, or why Node cannot be used."""
    node = shutil.which("node")
    if node is None:
        return "Node.js is not installed (custom JavaScript graders need node ≥ 20)"
    version = subprocess.run([node, "--version"], env={}, capture_output=True, timeout=20, check=False)
    match = _VERSION.match(version.stdout.decode(errors="replace"))
    if match is None or int(match.group(1)) < MIN_NODE_MAJOR:
        return f"Node.js {version.stdout.decode(errors='replace').strip() or '?'} is too old; need ≥ {MIN_NODE_MAJOR}"
    for flag in ("--permission", "--experimental-permission"):
        probe = subprocess.run([node, flag, "--no-warnings", "-e", "0"], env={}, capture_output=True, timeout=20,
                               check=False)  # fmt: skip
        if probe.returncode == 0:
            return (node, flag)
    return "this Node.js has no permission model"


@functools.cache
def _limit_prefix(as_mb: int) -> tuple[str, ...]:
    """``prlimit`` capping the address space (ArrayBuffers live outside the V8 heap) and core
    dumps (an out-of-memory abort must not write one); empty when prlimit is missing, in which
    case the heap limit alone bounds memory."""
    prlimit = shutil.which("prlimit")
    return (prlimit, f"--as={as_mb * MIB}", "--core=0", "--") if prlimit else ()


def isolation_problem() -> str | None:
    """Why custom JavaScript cannot run isolated here, or None when it can."""
    for found in (_node_command(), _network_prefix()):
        if isinstance(found, str):
            return found
    return None


def heap_for(payload_bytes: int, floor_mb: int) -> int:
    """Heap (MiB) for a payload: the payload text and its parsed form must fit with room to work."""
    return max(floor_mb, 64 + 8 * payload_bytes // MIB)


def node_argv(heap_mb: int) -> list[str]:
    """The full command line; raises :class:`IsolationUnavailable` rather than weaken it."""
    problem = isolation_problem()
    if problem is not None:
        raise IsolationUnavailable(f"custom JavaScript graders are refused: {problem}")
    node, net = _node_command(), _network_prefix()
    assert isinstance(node, tuple) and isinstance(net, tuple)
    return [
        *_limit_prefix(heap_mb * 2 + 1024), *net, node[0], node[1], f"--allow-fs-read={RUNTIME_JS}",
        "--no-addons", "--disallow-code-generation-from-strings", "--no-expose-wasm",
        f"--max-old-space-size={heap_mb}", "--no-warnings", str(RUNTIME_JS),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Frozen data handed to scripts


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_PASS: Final = _SCALARS | {dict, list}


@functools.cache
def _keys(cls: type) -> tuple[str, ...]:
    fields = getattr(cls, "_fields", None)
    names = fields if fields is not None else tuple(f.name for f in dataclasses.fields(cls))
    return tuple(_camel(n) for n in names)


def to_data(value: Any) -> Any:
    """Lookups as plain JSON data: records become objects with camelCase keys (``tool_calls`` →
    ``toolCalls``), tuples lists. Generic on purpose, so a field added to the lookups reaches
    scripts without a second list to keep in step. Plain dicts and lists are data copied from the
    session (tool arguments) and pass through as they are; orjson writes non-finite floats as null.
    Tuples whose first item is a scalar are homogeneous position lists and pass through too."""
    cls = value.__class__
    if cls in _PASS:
        return value
    if hasattr(cls, "_fields"):
        return dict(zip(_keys(cls), [v if v.__class__ in _PASS else to_data(v) for v in value], strict=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dict(zip(_keys(cls), (to_data(getattr(value, f.name)) for f in dataclasses.fields(value)), strict=True))
    if isinstance(value, Mapping):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if not value or value[0].__class__ in _SCALARS:
            return value
        return [to_data(v) for v in value]
    return value


def lookups_data(lookups: Any) -> dict[str, Any]:
    """The shared lookups as data, plus the derived counts built-ins read through properties."""
    data: dict[str, Any] = to_data(lookups)
    execution = getattr(lookups, "execution", None)
    if execution is not None and isinstance(data.get("execution"), dict):
        data["execution"]["requestCount"] = getattr(execution, "request_count", None)
    return data


# ---------------------------------------------------------------------------------------------
# Running


def _header(graders: Sequence[JsGrader], timeout: float) -> bytes:
    return orjson.dumps({
        "graders": [
            {"id": g.id, "script": g.script, "config": dict(g.config), "timeoutMs": max(1, round(timeout * 1000))}
            for g in graders
        ],
        "maxMessageChars": MAX_MESSAGE_CHARS,
    })  # fmt: skip


def _parse_lines(stdout: bytes, graders: Sequence[JsGrader]) -> list[JsOutcome]:
    """Complete result lines, in order; a line that does not belong to the expected grader ends
    the list (the runtime writes exactly one line per grader, so that cannot be a result)."""
    outcomes: list[JsOutcome] = []
    for line, grader in zip(stdout.split(b"\n")[:-1], graders, strict=False):
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            break
        result = doc.get("r") if isinstance(doc, dict) and doc.get("id") == grader.id else None
        if not isinstance(result, dict):
            break
        outcomes.append(_outcome(result))
    return outcomes


def _outcome(result: Mapping[str, Any]) -> JsOutcome:
    if isinstance(result.get("error"), str):
        return JsOutcome(error=str(result["error"]))
    value = result.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return JsOutcome(error="the runtime returned a malformed result")
    message = result.get("message")
    return JsOutcome(None if value is None else float(value), message if isinstance(message, str) else "")


def _death(run: Bounded, limits: JsLimits, heap_mb: int) -> str:
    """Why the process ended before the grader reported, in the user's terms."""
    if run.timed_out:
        return f"timed out after {limits.timeout:g} s; the Node process group was killed"
    if run.overflow is not None:
        return f"{run.overflow}; the Node process group was killed"
    stderr = run.stderr.decode(errors="replace")
    if "heap out of memory" in stderr or "Allocation failed" in stderr or "Reached heap limit" in stderr:
        return f"ran out of memory (heap limit {heap_mb} MiB); the Node process was stopped"
    if run.signal_name is not None:
        return f"the Node process was killed by {run.signal_name}"
    last = stderr.strip().splitlines()[-1:] or ["no output"]
    return f"the Node process exited with status {run.returncode} ({last[0][:300]})"


def run_js_graders(
    graders: Sequence[JsGrader],
    payload: bytes,
    limits: JsLimits = DEFAULT_JS_LIMITS,
) -> dict[str, JsOutcome]:
    """Run ``graders`` over ``payload`` (the JSON text of ``{"session", "lookups"}``), isolated.

    Returns one outcome per grader id. Raises :class:`IsolationUnavailable` (before running
    anything) when this machine cannot isolate Node; the caller records that as each grader's
    error.
    """
    heap_mb = heap_for(len(payload), limits.heap_mb)
    argv = node_argv(heap_mb)
    outcomes: dict[str, JsOutcome] = {}
    pending = list(graders)
    while pending:
        run = _run_batch(argv, pending, payload, limits)
        done = _parse_lines(run.stdout, pending)
        for grader, outcome in zip(pending, done, strict=False):
            outcomes[grader.id] = outcome
        if len(done) == len(pending):
            break
        outcomes[pending[len(done)].id] = JsOutcome(error=_death(run, limits, heap_mb))
        pending = pending[len(done) + 1 :]
    return outcomes


def _run_batch(argv: Sequence[str], graders: Sequence[JsGrader], payload: bytes, limits: JsLimits) -> Bounded:
    """One Node process for ``graders``; the deadline restarts with each result it reports."""
    stdin = _header(graders, limits.timeout) + b"\n" + payload
    lines = [0]

    def progress(out: bytes) -> bool:
        count = out.count(b"\n")
        grew, lines[0] = count > lines[0], count
        return grew

    # The Python-side deadline backs up the in-process vm timeout (which cannot interrupt
    # everything); it allows a little more, so the runtime's own, clearer message normally wins.
    step = limits.timeout + 1.0
    with tempfile.TemporaryDirectory(prefix="mst-js-grader-") as cwd:
        return run_bounded(argv, env={}, cwd=Path(cwd), stdin=stdin, timeout=limits.startup + step,
                           step_timeout=step, max_output=limits.max_output, progress=progress)  # fmt: skip
