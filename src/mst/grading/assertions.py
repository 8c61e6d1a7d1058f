"""Built-in assertions: deterministic checks of one trial, each giving (passed, reason).

Assertions run for every trial, so they must cost microseconds: they read the answer (already
in memory) and touch :attr:`TrialView.events` only when they need the transcript (tool
assertions, ``field: transcript``). A check that cannot be made — no transcript, an ``equals``
with nothing to compare to, a malformed JSON path — raises :class:`AssertionConfigError` (or the
transcript's error); :func:`mst.grading.grade.grade_trial` records that as a grading error, so
missing evidence never reads as a failed (or passed) trial.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

import orjson

from mst.config.models import (
    Assertion,
    Contains,
    Equals,
    FinalAnswer,
    JsonPath,
    Regex,
    ToolCallCount,
    ToolCalled,
)
from mst.grading.judges import TrialView


class AssertionConfigError(ValueError):
    """An assertion that cannot be evaluated as configured (a grading error, not a failure)."""


AssertionResult = tuple[bool, str]

_MISSING: Final = object()


def assertion_name(assertion: Assertion) -> str:
    """The name results show: the assertion's ``id``, or its type."""
    return assertion.id or assertion.type


def assertion_identity(assertion: Assertion) -> str:
    """Digest of the assertion's configuration, so resume treats assertions like judges."""
    data = assertion.model_dump(mode="json")
    if data.get("includeRejected") is False:
        del data["includeRejected"]  # the default: identities of assertions written before the option stay
    payload = orjson.dumps({"schema": "mst.assertion/v1", "assertion": data}, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def evaluate(assertion: Assertion, trial: TrialView) -> AssertionResult:
    """Evaluate one built-in assertion against a trial → (passed, reason)."""
    return _EVALUATORS[type(assertion)](assertion, trial)


# ---------------------------------------------------------------------------------------------
# Text assertions


def _text(assertion: Assertion, trial: TrialView) -> str | None:
    if assertion.field == "transcript":
        return trial.transcript_text
    return trial.answer


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _contains(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, Contains)
    text = _text(a, trial)
    negate = a.type == "not-contains"
    if text is None:
        return negate, f"no {a.field}"
    found = a.value.casefold() in text.casefold() if a.ignoreCase else a.value in text
    passed = found != negate
    where = f"the {a.field}"
    return passed, f"{where} {'contains' if found else 'does not contain'} {_short(a.value)}"


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _regex(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, Regex)
    text = _text(a, trial)
    if text is None:
        return False, f"no {a.field}"
    match = _compiled(a.pattern).search(text)
    if match is None:
        return False, f"the {a.field} does not match /{a.pattern}/"
    return True, f"the {a.field} matches /{a.pattern}/ at {_short(match.group(0))}"


def _equals(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, Equals)
    if "value" in a.model_fields_set:
        expected = a.value
    elif trial.expected is not None:
        expected = trial.expected
    else:
        raise AssertionConfigError("equals has no 'value' and the case has no 'expected' to compare to")
    text = _text(a, trial)
    if text is None:
        return expected is None, f"no {a.field}"
    if isinstance(expected, str):
        got, want = (text.strip(), expected.strip()) if a.strip else (text, expected)
        if a.ignoreCase:
            got, want = got.casefold(), want.casefold()
        if got == want:
            return True, f"the {a.field} equals {_short(expected)}"
        return False, f"expected {_short(expected)}, got {_short(text)}"
    # A non-string expectation (a number, a list, an object) compares with the answer as JSON.
    parsed = _parse_json(text)
    if parsed is _MISSING:
        return False, f"expected {_short(_dump(expected))}; the {a.field} is not JSON"
    if json_equal(parsed, expected):
        return True, f"the {a.field} equals {_short(_dump(expected))}"
    return False, f"expected {_short(_dump(expected))}, got {_short(_dump(parsed))}"


def _final_answer(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, FinalAnswer)
    text = _text(a, trial)
    if text is None:
        return False, f"no {a.field}"
    if not text.strip():
        return False, f"the {a.field} is empty"
    return True, f"the {a.field} is present"


def _dump(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def json_equal(a: Any, b: Any) -> bool:
    """Structural equality of JSON values where ``true`` is not ``1`` (unlike Python's ``==``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (isinstance(b, list | tuple) and len(a) == len(b)
                and all(json_equal(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def _parse_json(text: str) -> Any:
    """The text as JSON, or ``_MISSING``. A single surrounding Markdown code fence is allowed,
    because models routinely wrap JSON answers in one."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    fenced = _FENCE.match(text)
    if fenced is not None:
        try:
            return orjson.loads(fenced.group(1))
        except orjson.JSONDecodeError:
            pass
    return _MISSING


# ---------------------------------------------------------------------------------------------
# JSON path: a small subset ($, .key, ['key'], [n], [*], .*), compiled once per path


Step = tuple[str, Any]  # ("key", name) | ("index", n) | ("all", None)


@lru_cache(maxsize=1024)
def compile_path(path: str) -> tuple[tuple[Step, ...], bool]:
    """Parse a JSON path → (steps, whether it can match several values). Raises on bad syntax."""
    if not path.startswith("$"):
        raise AssertionConfigError(f"JSON path {path!r} must start with '$'")
    steps: list[Step] = []
    i, n = 1, len(path)
    while i < n:
        ch = path[i]
        if ch == ".":
            i += 1
            if i < n and path[i] == "*":
                steps.append(("all", None))
                i += 1
                continue
            start = i
            while i < n and (path[i].isalnum() or path[i] in "_-$"):
                i += 1
            if start == i:
                raise AssertionConfigError(f"JSON path {path!r}: expected a key after '.' at {start}")
            steps.append(("key", path[start:i]))
        elif ch == "[":
            close = _bracket(path, i)
            inner = path[i + 1 : close].strip()
            i = close + 1
            if inner == "*":
                steps.append(("all", None))
            elif inner[:1] in ("'", '"') and len(inner) >= 2 and inner[-1] == inner[0]:
                steps.append(("key", _unquote(path, inner)))
            elif re.fullmatch(r"-?\d+", inner):
                steps.append(("index", int(inner)))
            else:
                raise AssertionConfigError(f"JSON path {path!r}: unsupported selector [{inner}]")
        else:
            raise AssertionConfigError(f"JSON path {path!r}: unexpected {ch!r} at {i}")
    return tuple(steps), any(kind == "all" for kind, _ in steps)


def _bracket(path: str, start: int) -> int:
    i, quote = start + 1, None
    while i < len(path):
        ch = path[i]
        if quote is not None:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "]":
            return i
        i += 1
    raise AssertionConfigError(f"JSON path {path!r}: '[' at {start} is never closed")


def _unquote(path: str, inner: str) -> str:
    body, out, i = inner[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(body[i + 1])
            i += 2
            continue
        if ch == inner[0]:
            raise AssertionConfigError(f"JSON path {path!r}: unescaped quote in [{inner}]")
        out.append(ch)
        i += 1
    return "".join(out)


def select(document: Any, steps: tuple[Step, ...]) -> list[Any]:
    """Every value ``steps`` reach in ``document`` (empty when the path does not exist)."""
    current = [document]
    for kind, arg in steps:
        following: list[Any] = []
        for value in current:
            if kind == "key":
                if isinstance(value, dict) and arg in value:
                    following.append(value[arg])
            elif kind == "index":
                if isinstance(value, list) and -len(value) <= arg < len(value):
                    following.append(value[arg])
            elif isinstance(value, list):
                following.extend(value)
            elif isinstance(value, dict):
                following.extend(value.values())
        current = following
    return current


def _json_path(a: Any, trial: TrialView) -> AssertionResult:
    """Without ``equals``: the path must exist. With it: a definite path's value must equal it;
    a path with a wildcard yields the list of matches, which is compared as a list."""
    assert isinstance(a, JsonPath)
    steps, indefinite = compile_path(a.path)
    text = _text(a, trial)
    if text is None:
        return False, f"no {a.field}"
    document = _parse_json(text)
    if document is _MISSING:
        return False, f"the {a.field} is not JSON"
    matches = select(document, steps)
    if "equals" not in a.model_fields_set:
        if matches:
            return True, f"{a.path} exists"
        return False, f"{a.path} does not exist in the {a.field}"
    if not matches and not indefinite:
        return False, f"{a.path} does not exist in the {a.field}"
    got = matches if indefinite else matches[0]
    if json_equal(got, a.equals):
        return True, f"{a.path} equals {_short(_dump(a.equals))}"
    return False, f"{a.path} is {_short(_dump(got))}, expected {_short(_dump(a.equals))}"


# ---------------------------------------------------------------------------------------------
# Tool assertions


def _names_match(call: dict[str, Any], tool: str) -> bool:
    """A tool is named by its tool name, or qualified by its MCP server as ``server/tool`` (or
    ``server__tool``, the session lookups' spelling)."""
    name = call.get("name")
    if name == tool or call.get("qualified") == tool:
        return True
    server = call.get("server")
    return server is not None and f"{server}/{name}" == tool


def _counted(a: ToolCalled | ToolCallCount, trial: TrialView) -> list[dict[str, Any]]:
    """The calls a tool assertion counts: only those that reached a server, unless the
    assertion says ``includeRejected: true`` (a call mst refused never ran)."""
    calls = trial.tool_calls
    return calls if a.includeRejected else [c for c in calls if not c.get("rejected")]


def subset_match(want: Any, got: Any) -> bool:
    """``want`` is contained in ``got``: objects match on the keys ``want`` gives (recursively);
    everything else must be equal."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and subset_match(v, got[k]) for k, v in want.items())
    return json_equal(want, got)


def _tool_called(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, ToolCalled)
    calls = [c for c in _counted(a, trial) if _names_match(c, a.tool)]
    matching = [c for c in calls if subset_match(a.args, c.get("input"))] if a.args is not None else calls
    what = f"{a.tool!r}" + ("" if a.args is None else f" with {_short(_dump(a.args))}")
    count = len(matching)
    if a.type == "tool-called":
        if count:
            return True, f"{what} was called {count} time{'s' if count != 1 else ''}"
        if calls and a.args is not None:
            return False, f"{a.tool!r} was called {len(calls)} time(s), never with {_short(_dump(a.args))}"
        return False, f"{what} was not called"
    if count:
        return False, f"{what} was called {count} time{'s' if count != 1 else ''}"
    return True, f"{what} was not called"


def _tool_calls(a: Any, trial: TrialView) -> AssertionResult:
    assert isinstance(a, ToolCallCount)
    calls = _counted(a, trial)
    count = len(calls) if a.tool is None else sum(1 for c in calls if _names_match(c, a.tool))
    what = "tool calls" if a.tool is None else f"calls of {a.tool!r}"
    if a.min is not None and count < a.min:
        return False, f"{count} {what}, fewer than {a.min}"
    if a.max is not None and count > a.max:
        return False, f"{count} {what}, more than {a.max}"
    return True, f"{count} {what}"


_EVALUATORS: Final[dict[type[Any], Callable[[Any, TrialView], AssertionResult]]] = {
    Contains: _contains,
    Regex: _regex,
    Equals: _equals,
    JsonPath: _json_path,
    ToolCalled: _tool_called,
    ToolCallCount: _tool_calls,
    FinalAnswer: _final_answer,
}
