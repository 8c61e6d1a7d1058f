"""The bounded Bash compatibility runtime for ``operational-value`` (docs/graders.md).

The script's bytes were frozen when the eval was resolved; those bytes, not the file on disk,
are analyzed again (:mod:`~mst.graders.custom.bash_check`) and then run as
``bash --noprofile --norc SCRIPT SESSION_FILE`` with:

* the redacted session as JSONL in a temporary file: ``$1``, ``MST_SESSION_FILE`` and
  ``GH_AW_SESSION_FILE`` (scripts written for the GitHub Agentic Workflows graders work unchanged);
* the grader's configuration as JSON in ``MST_GRADER_CONFIG`` and ``GH_AW_GRADER_CONFIG``;
* empty stdin (legacy scripts that read a request from stdin must read the session file);
* an environment of exactly those variables and a minimal ``PATH`` — no credential of the
  parent reaches the script — and a fresh temporary working directory;
* 120 s of wall-clock time and 1 MiB per output stream, the whole process group killed beyond.

Output contract (the one GitHub Agentic Workflows' evaluators use): stdout is a non-empty JSON array of
objects with unique string ``id`` and a finite-or-null ``value``; the first gives
``operational-value``'s value, the rest are diagnostics. Anything else is an error. Bash is
repository-trusted code, not a sandbox: this bounds it, it does not contain it.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from mst.graders.custom.bash_check import BashAnalyzerUnavailable, analyze_shell
from mst.graders.custom.bounded import MIB, Bounded, run_bounded

MINIMAL_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
MAX_DIAGNOSTICS: Final = 100


@dataclass(frozen=True, slots=True)
class BashLimits:
    timeout: float = 120.0
    max_output: int = MIB


DEFAULT_BASH_LIMITS: Final = BashLimits()


@dataclass(frozen=True, slots=True)
class BashOutcome:
    """The value (first metric), the diagnostics (the other metrics), or an error."""

    value: float | None = None
    message: str = ""
    diagnostics: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    error: str | None = None


def session_jsonl(session: Sequence[Mapping[str, Any]]) -> bytes:
    """One event per line, as a JSONL session file."""
    return b"".join(orjson.dumps(event) + b"\n" for event in session)


def _bash() -> str:
    for candidate in ("/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"):
        if Path(candidate).is_file():
            return candidate
    return "bash"


def run_operational_value(
    source: str,
    session: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    limits: BashLimits = DEFAULT_BASH_LIMITS,
) -> BashOutcome:
    """Check ``source`` again, then run it over ``session`` within ``limits``."""
    try:
        analysis = analyze_shell(source)
    except BashAnalyzerUnavailable as exc:
        return BashOutcome(error=str(exc))
    if not analysis.accepted:
        found = "; ".join(str(r) for r in analysis.rejections[:10])
        return BashOutcome(error=f"the script was rejected by the shell analysis: {found}")
    with tempfile.TemporaryDirectory(prefix="mst-bash-grader-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        script, session_file = root / "grader.sh", root / "session.jsonl"
        script.write_text(source, encoding="utf-8")
        session_file.write_bytes(session_jsonl(session))
        config_json = orjson.dumps(dict(config)).decode()
        env = {
            "PATH": MINIMAL_PATH,
            "MST_SESSION_FILE": str(session_file),
            "GH_AW_SESSION_FILE": str(session_file),
            "MST_GRADER_CONFIG": config_json,
            "GH_AW_GRADER_CONFIG": config_json,
        }
        argv = [_bash(), "--noprofile", "--norc", str(script), str(session_file)]
        run = run_bounded(argv, env=env, cwd=work, timeout=limits.timeout, max_output=limits.max_output)
    return _interpret(run, limits)


def _interpret(run: Bounded, limits: BashLimits) -> BashOutcome:
    if run.timed_out:
        return BashOutcome(error=f"timed out after {limits.timeout:g} s; the process group was killed")
    if run.overflow is not None:
        return BashOutcome(error=f"{run.overflow}; the process group was killed")
    if run.returncode != 0:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-3:]
        how = f"was killed by {run.signal_name}" if run.signal_name else f"exited with status {run.returncode}"
        return BashOutcome(error=f"the script {how}" + (f": {' | '.join(tail)[:500]}" if tail else ""))
    return parse_metrics(run.stdout)


def parse_metrics(stdout: bytes) -> BashOutcome:
    """The legacy metric array: non-empty, objects with unique ids and finite-or-null values."""
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        shown = stdout[:120].decode(errors="replace").strip()
        return BashOutcome(error=f"stdout is not JSON (expected an array of {{id, value}}): {shown!r}")
    if not isinstance(doc, list) or not doc:
        return BashOutcome(error="stdout must be a non-empty JSON array of {id, value} objects")
    seen: set[str] = set()
    for i, item in enumerate(doc):
        problem = _metric_problem(item, seen)
        if problem is not None:
            return BashOutcome(error=f"metric [{i}] {problem}")
    first, rest = doc[0], doc[1:]
    diagnostics = tuple({"id": m["id"], "value": _number(m["value"])} for m in rest[:MAX_DIAGNOSTICS])
    message = f"metric '{first['id']}' from the operational-value script"
    if rest:
        shown = ", ".join(f"{d['id']}={d['value']}" for d in diagnostics[:10])
        message += f"; diagnostics: {shown}" + (" …" if len(rest) > 10 else "")
    return BashOutcome(_number(first["value"]), message, diagnostics)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _metric_problem(item: Any, seen: set[str]) -> str | None:
    if not isinstance(item, dict):
        return "is not an object"
    mid, value = item.get("id"), item.get("value", ...)
    if not isinstance(mid, str) or not mid:
        return "needs a non-empty string 'id'"
    if mid in seen:
        return f"repeats the id {mid!r}; ids must be unique"
    seen.add(mid)
    if value is ...:
        return f"({mid!r}) has no 'value'"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if value is not None and not (numeric and math.isfinite(value)):
        return f"({mid!r}) has a value that is not a finite number or null"
    return None


__all__ = [
    "DEFAULT_BASH_LIMITS",
    "MINIMAL_PATH",
    "BashLimits",
    "BashOutcome",
    "parse_metrics",
    "run_operational_value",
    "session_jsonl",
]
