"""The custom phase of grading: every enabled custom grader of one trial, after the built-ins.

Kept apart from :mod:`mst.graders.results` so that the split between the two phases (docs/graders.md) is visible in the
code: the built-in phase never imports this module's runtimes, and nothing here ever runs a
built-in. Each custom grader yields an outcome (a measurement, or an error saying why there is
none); the caller turns outcomes into schema-v2 results next to the built-ins' results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from mst.graders.base import Measurement
from mst.graders.custom.bash_run import DEFAULT_BASH_LIMITS, BashLimits, run_operational_value
from mst.graders.custom.js import (
    DEFAULT_JS_LIMITS,
    IsolationUnavailable,
    JsGrader,
    JsLimits,
    lookups_data,
    run_js_graders,
)

if TYPE_CHECKING:
    from mst.graders.config import GraderSpec
    from mst.session.lookups import SessionLookups

NO_SCRIPT: Final = "no script source: a grader manifest records only the source digest; run it from the eval file"
NO_RUN_SOURCE: Final = "no frozen script bytes: operational-value runs only from a resolved eval file"


@dataclass(frozen=True, slots=True)
class CustomOutcome:
    """What one custom grader produced: a measurement, or an error; Bash adds diagnostics."""

    measurement: Measurement | None
    error: str | None = None
    diagnostics: tuple[dict[str, Any], ...] | None = None


def _payload(session: Sequence[Mapping[str, Any]], lookups: SessionLookups) -> bytes:
    """The session and the lookups, serialised once for every JavaScript grader of the trial (a
    lazily read session, :class:`mst.session.lazy.LazySession`, is decoded whole for it)."""
    events = session if isinstance(session, list) else list(session)
    return orjson.dumps({"session": events, "lookups": lookups_data(lookups)})


def _run_javascript(specs: Sequence[GraderSpec], session: Sequence[Mapping[str, Any]], lookups: SessionLookups,
                    limits: JsLimits) -> dict[str, CustomOutcome]:  # fmt: skip
    runnable = [JsGrader(s.id, s.script, s.config) for s in specs if s.script is not None]
    outcomes = {s.id: CustomOutcome(None, NO_SCRIPT) for s in specs if s.script is None}
    if not runnable:
        return outcomes
    try:
        results = run_js_graders(runnable, _payload(session, lookups), limits)
    except (IsolationUnavailable, orjson.JSONEncodeError) as exc:
        return outcomes | {g.id: CustomOutcome(None, str(exc)) for g in runnable}
    for grader in runnable:
        r = results[grader.id]
        message = r.message or "the value the custom JavaScript grader returned"
        outcomes[grader.id] = CustomOutcome(None if r.error else Measurement(r.value, message), r.error)
    return outcomes


def _run_bash(spec: GraderSpec, session: Sequence[Mapping[str, Any]], limits: BashLimits) -> CustomOutcome:
    source = spec.run_source
    if source is None:
        return CustomOutcome(None, NO_RUN_SOURCE)
    r = run_operational_value(source, session, spec.config, limits)
    if r.error is not None:
        return CustomOutcome(None, r.error)
    return CustomOutcome(Measurement(r.value, r.message), None, r.diagnostics)


def run_custom_graders(
    session: Sequence[Mapping[str, Any]],
    specs: Sequence[GraderSpec],
    lookups: SessionLookups,
    *,
    js_limits: JsLimits = DEFAULT_JS_LIMITS,
    bash_limits: BashLimits = DEFAULT_BASH_LIMITS,
) -> dict[str, CustomOutcome]:
    """Run the enabled custom graders in ``specs`` (built-ins in it are ignored), isolated.

    All JavaScript graders share one Node process (each in its own context and time budget);
    ``operational-value`` runs in its own Bash process.
    """
    javascript = [s for s in specs if s.enabled and s.kind == "custom"]
    outcomes = _run_javascript(javascript, session, lookups, js_limits) if javascript else {}
    for spec in specs:
        if spec.enabled and spec.kind == "operational-value":
            outcomes[spec.id] = _run_bash(spec, session, bash_limits)
    return outcomes
