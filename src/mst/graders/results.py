"""Running the enabled graders and the results schema, version 2 (docs/graders.md, "Results").

``run_graders`` is the one implementation behind the grading phase and ``mst graders run``:
lookups are built once (or passed in), each enabled grader runs against the same read-only
session, and each outcome becomes one result dict. A grader that raises, or returns a value that
is not finite or lies outside its declared range, is recorded as ``error`` with value None — a
broken computation must never read as a score.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import orjson

from mst.graders.base import GraderFn, GraderInput, Measurement, new_tuple
from mst.graders.config import GradersConfig, GraderSpec
from mst.graders.registry import BUILTINS
from mst.session.lookups import SMALL_PASS, SessionLookups, create_session_lookups, paused_gc

SCHEMA_VERSION: Final = 2
MANIFEST_EVENT: Final = "grader.manifest"
RESULT_EVENT: Final = "grader.result"
GRADING_COMPONENT: Final = "mst.graders"
RUNTIME_UNAVAILABLE: Final = "custom graders run only in the custom phase (run_custom_graders), never among built-ins"

STATUS_PASS: Final = "pass"
STATUS_FAIL: Final = "fail"
STATUS_UNAVAILABLE: Final = "unavailable"
STATUS_ERROR: Final = "error"
THRESHOLD_MET: Final = "met"
THRESHOLD_MISSED: Final = "missed"


def manifest_entry(spec: GraderSpec) -> dict[str, Any]:
    """Data-only description of one grader: never its script or Bash source, only a digest."""
    entry: dict[str, Any] = {
        "id": spec.id,
        "kind": spec.kind,
        "enabled": spec.enabled,
        "name": spec.name,
        "description": spec.description,
        "unit": spec.unit,
        "direction": spec.direction,
        "threshold": spec.threshold,
        "min": spec.min,
        "max": spec.max,
        "config": dict(spec.config),
        "implementation": spec.implementation,
    }
    if spec.run is not None:
        entry["run"] = spec.run
    return entry


def build_manifest(config: GradersConfig) -> dict[str, Any]:
    """All known graders, disabled ones included, so disabling persists through replay.

    The manifest depends on the configuration alone, and a run grades every trial with one
    configuration: a run builds it once (its grading context) and passes it to
    :func:`run_graders`.
    """
    return {"schemaVersion": SCHEMA_VERSION, "graders": [manifest_entry(s) for s in config.specs]}


def _threshold(spec: GraderSpec, value: float) -> str | None:
    if spec.threshold is None:
        return None
    met = value >= spec.threshold if spec.direction == "higher" else value <= spec.threshold
    return THRESHOLD_MET if met else THRESHOLD_MISSED


def _out_of_range(spec: GraderSpec, value: float) -> str | None:
    """Why ``value`` is not a valid result of ``spec`` (:func:`make_result` calls this only after
    its inline test found the value out of range or not finite), or None."""
    if not math.isfinite(value):
        return f"grader returned a non-finite value ({value})"
    if spec.min is not None and value < spec.min:
        return f"grader returned {value:g}, below its declared minimum {spec.min:g}"
    if spec.max is not None and value > spec.max:
        return f"grader returned {value:g}, above its declared maximum {spec.max:g}"
    return None


def result_template(spec: GraderSpec) -> dict[str, Any]:
    """A result of ``spec`` with its grader's fixed fields set and the computed ones empty, in
    the schema's key order: a result is this dict copied and four fields stored, cheaper than a
    nine-key dict built field by field (ten results are made for every trial graded)."""
    return {
        "id": spec.id,
        "implementation": spec.implementation,
        "value": None,
        "unit": spec.unit,
        "direction": spec.direction,
        "status": STATUS_UNAVAILABLE,
        "threshold": spec.threshold,
        "thresholdOutcome": None,
        "message": "",
    }


def make_result(spec: GraderSpec, measurement: Measurement | None, error: str | None = None) -> dict[str, Any]:
    """One schema-v2 result. ``status`` is ``pass`` when a value exists and no threshold is
    missed (a metric with no threshold has nothing to fail), ``fail`` when its threshold is
    missed, ``unavailable`` without a value, ``error`` when the computation failed."""
    value, message = measurement if measurement is not None else (None, "")
    return _filled(result_template(spec), spec, value, message, error)


def _settled(spec: GraderSpec, value: float | None, message: str,
             error: str | None) -> tuple[float | None, str, str, str | None]:
    """The computed fields of :func:`make_result`'s result, ``(value, status, message,
    thresholdOutcome)``: the one rule that both a result dict (:func:`_filled`) and a record's
    entry made without one (:func:`grader_entries`) follow."""
    if error is None and value is not None and not (
            (spec.min is None or value >= spec.min) and (spec.max is None or value <= spec.max)
            and value - value == 0.0):  # in range and finite (the common case) without a call
        error = _out_of_range(spec, value)
    if error is not None:
        return None, STATUS_ERROR, error, None
    if value is None:
        return None, STATUS_UNAVAILABLE, message, None
    if spec.threshold is None:
        return value, STATUS_PASS, message, None
    outcome = _threshold(spec, value)
    return value, STATUS_FAIL if outcome == THRESHOLD_MISSED else STATUS_PASS, message, outcome


def _filled(template: dict[str, Any], spec: GraderSpec, value: float | None, message: str,
            error: str | None) -> dict[str, Any]:
    """:func:`make_result` on a copy of ``spec``'s :func:`result_template`."""
    result = template.copy()
    result["value"], result["status"], result["message"], result["thresholdOutcome"] = _settled(
        spec, value, message, error)
    return result


# One enabled built-in as the per-trial loop runs it: its spec, its computation, its result
# template, and its own configuration (None when empty: the graders then share one input).
_Step = tuple[GraderSpec, GraderFn, dict[str, Any], Mapping[str, Any] | None]
_NO_CONFIG: Final[Mapping[str, Any]] = MappingProxyType({})


def _step(spec: GraderSpec) -> _Step:
    return spec, BUILTINS[spec.id].compute, result_template(spec), spec.config or None


class _Plan:
    """The built-in steps of the configuration graded last: a run grades every trial with one
    configuration, so they are derived once per run, not once per trial (the identity check
    makes another configuration derive its own). The configuration and its steps are kept as
    one tuple, replaced in one assignment, so grading threads never see one's steps with the
    other's configuration."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: tuple[GradersConfig | None, tuple[_Step, ...]] = (None, ())

    def of(self, config: GradersConfig) -> tuple[_Step, ...]:
        held = self.held
        if held[0] is not config:
            held = self.held = (config, tuple(_step(s) for s in config.enabled if s.kind == "builtin"))
        return held[1]


_PLAN: Final = _Plan()


@dataclass(frozen=True, slots=True)
class GraderRun:
    """The manifest and results of one grading, and the events that record them in the session."""

    manifest: dict[str, Any]
    results: list[dict[str, Any]]
    base_index: int
    manifest_json: bytes = b""  # the manifest's encoding, when the caller made it once for a run

    def results_document(self) -> dict[str, Any]:
        """The ``grader_results.json`` content."""
        return {"schemaVersion": SCHEMA_VERSION, "results": self.results}

    def events(self) -> list[dict[str, Any]]:
        """``grader.manifest`` then one ``grader.result`` per result, provenance phase
        ``grading``, indexed after the session's last event. Their data equal the persisted
        documents, so the files and the graded session can be checked against each other."""
        docs = [(MANIFEST_EVENT, self.manifest), *((RESULT_EVENT, r) for r in self.results)]
        return [
            {
                "type": etype,
                "data": data,
                "provenance": {
                    "component": GRADING_COMPONENT,
                    "phase": "grading",
                    "index": self.base_index + i,
                },
            }
            for i, (etype, data) in enumerate(docs)
        ]


    def events_jsonl(self) -> bytes:
        """:meth:`events` as JSONL, byte for byte what encoding each event gives; the manifest,
        the same for every trial of a run, is encoded once, and the lines' pieces are joined once.
        The provenance tails are formatted in one pass (:func:`_tails`)."""
        index, results = self.base_index, self.results
        tails = _tails(index, len(results) + 1)
        manifest = self.manifest_json or orjson.dumps(self.manifest)
        pieces = [_MANIFEST_HEAD, manifest, tails[0]]
        extend, dumps = pieces.extend, orjson.dumps
        for result, tail in zip(results, tails[1:], strict=True):
            extend((_RESULT_HEAD, dumps(result), tail))
        return b"".join(pieces)


_MANIFEST_HEAD: Final = b'{"type":"' + MANIFEST_EVENT.encode() + b'","data":'
_RESULT_HEAD: Final = b'{"type":"' + RESULT_EVENT.encode() + b'","data":'
_PROVENANCE: Final = (b',"provenance":{"component":"' + GRADING_COMPONENT.encode()
                      + b'","phase":"grading","index":%d}}\n')


def _tails(base: int, count: int) -> list[bytes]:
    """The provenance tails of indexes ``base`` .. ``base + count - 1``."""
    return [_PROVENANCE % i for i in range(base, base + count)]


def run_graders(
    session: Sequence[Mapping[str, Any]],
    config: GradersConfig,
    *,
    expected: Any = None,
    lookups: SessionLookups | None = None,
    manifest: dict[str, Any] | None = None,
) -> GraderRun:
    """Grade one (already redacted) session with every enabled grader, in registry order.

    The session is shared, never copied and never mutated; ``lookups`` may be passed when the
    caller already built them for this exact session, and ``manifest`` when it built the
    configuration's manifest once for many sessions.
    """
    document = manifest if manifest is not None else build_manifest(config)
    return GraderRun(document, grader_results(session, config, expected=expected, lookups=lookups), len(session))


def grader_results(
    session: Sequence[Mapping[str, Any]], config: GradersConfig, *, expected: Any = None,
    lookups: SessionLookups | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_graders`' results alone, in the order of ``config.enabled`` (what the grading
    phase keeps of a trial's grading: it writes the events with the run's one manifest)."""
    shared = lookups if lookups is not None else create_session_lookups(session)
    combined = run_builtin_graders(session, config, shared, expected=expected)
    if len(combined) == len(config.enabled):  # built-ins only: already in the enabled order
        return list(combined.values())
    for grader_id, result in run_custom_graders(session, config, shared).items():
        combined.setdefault(grader_id, result)  # custom results never overwrite a built-in's
    return [combined[s.id] for s in config.enabled]


def run_builtin_graders(
    session: Sequence[Mapping[str, Any]], config: GradersConfig, lookups: SessionLookups, *, expected: Any = None
) -> dict[str, dict[str, Any]]:
    """The built-in phase: pure computation in this process, custom graders skipped entirely."""
    steps = _PLAN.of(config)
    if len(session) < SMALL_PASS:  # a trial's session: paused_gc would leave it alone
        return _run_steps(steps, new_tuple(GraderInput, (session, lookups, _NO_CONFIG, expected)))
    with paused_gc(len(session)):  # same reason as for the lookups: no collection sweeps over the session
        return _run_steps(steps, new_tuple(GraderInput, (session, lookups, _NO_CONFIG, expected)))


def _run_steps(steps: tuple[_Step, ...], shared: GraderInput) -> dict[str, dict[str, Any]]:
    """Each step's result by grader id (one loop, no call per grader but its own: this runs ten
    times per trial graded). A grader with a configuration of its own gets ``shared`` with that
    configuration, the others ``shared`` itself; any exception a grader raises becomes an
    ``error`` result naming it. Custom source is never executed here (docs/graders.md): see
    :func:`run_custom_graders`."""
    results: dict[str, dict[str, Any]] = {}
    for spec, compute, template, own in steps:
        try:
            measurement = compute(shared if own is None else shared._replace(config=own))
        except Exception as exc:  # a grader bug must not stop the others or become a score
            results[spec.id] = _filled(template, spec, None, "", f"{type(exc).__name__}: {exc}")
            continue
        value, message = measurement
        results[spec.id] = _filled(template, spec, value, message, None)
    return results


def run_custom_graders(
    session: Sequence[Mapping[str, Any]], config: GradersConfig, lookups: SessionLookups
) -> dict[str, dict[str, Any]]:
    """The custom phase, after the built-ins: each enabled custom grader in its isolated runtime
    (:mod:`mst.graders.custom`), its outcome recorded as a schema-v2 result. Imported lazily so the
    built-in phase never loads the runtimes."""
    custom = [s for s in config.enabled if s.kind != "builtin"]
    if not custom:
        return {}
    from mst.graders.custom.runner import run_custom_graders as run_isolated

    results: dict[str, dict[str, Any]] = {}
    for grader_id, outcome in run_isolated(session, custom, lookups).items():
        spec = config.get(grader_id)
        assert spec is not None
        result = make_result(spec, outcome.measurement, outcome.error)
        if outcome.diagnostics is not None:
            result["diagnostics"] = list(outcome.diagnostics)
        results[grader_id] = result
    return results


# ---------------------------------------------------------------------------------------------
# A result as a trial's grading record keeps it (docs/graders.md, "Results")
#
# A run grades every trial with one manifest, written once (``graders/manifest-<digest>.json``).
# Of each result the record keeps what the manifest does not imply: ``value``, ``status`` and,
# when not empty, ``message`` and ``diagnostics``. The other fields (implementation, unit,
# direction, threshold) are the manifest's, and ``thresholdOutcome`` follows from the status.
# A result those rules would not rebuild exactly is kept whole, under ``result``: the graded
# session read back always holds the results grading made.

ENTRY_RESULT: Final = "result"


def _manifest_templates(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each grader's :func:`result_template`, from its manifest entry (which has the same fields)."""
    templates: dict[str, dict[str, Any]] = {}
    for g in manifest.get("graders") or ():
        if isinstance(g, Mapping) and isinstance(g.get("id"), str):
            templates[g["id"]] = {
                "id": g["id"], "implementation": g.get("implementation"), "value": None, "unit": g.get("unit"),
                "direction": g.get("direction"), "status": STATUS_UNAVAILABLE, "threshold": g.get("threshold"),
                "thresholdOutcome": None, "message": "",
            }
    return templates


class _Templates:
    """The templates of the manifest used last (a run reads and writes every trial with one; the
    identity check makes another manifest derive its own), held as one tuple, as :class:`_Plan`."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: tuple[Mapping[str, Any] | None, dict[str, dict[str, Any]]] = (None, {})

    def of(self, manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        held = self.held
        if held[0] is not manifest:
            held = self.held = (manifest, _manifest_templates(manifest))
        return held[1]


_TEMPLATES: Final = _Templates()


# An entry as a trial's record holds it: (id, value, status, message, detail), ``detail`` None,
# ``{"diagnostics": [...]}`` or ``{"result": {...}}`` (the layout of
# :class:`mst.runs.grading_records.GraderValue`, which is made of it without a copy).
Entry = tuple[Any, Any, Any, str, dict[str, Any] | None]
_KEYS: Final = 9  # the fields of a result (:func:`result_template`), diagnostics aside


def record_entry(manifest: Mapping[str, Any], result: Mapping[str, Any]) -> Entry:
    """What a trial's record keeps of ``result``: its id, value, status, message and diagnostics
    when ``manifest`` implies the rest exactly, otherwise the whole result under ``result``
    (:func:`result_of_entry` is the inverse). See :func:`record_entries`."""
    return record_entries(manifest, (result,))[0]


def record_entries(manifest: Mapping[str, Any], results: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """:func:`record_entry` of each of a trial's results, in one loop (ten results per trial
    graded: the test is a few comparisons per result, no call and, for a result without
    diagnostics, no dict built)."""
    templates, entries = _TEMPLATES.of(manifest), []
    for result in results:
        grader_id = result.get("id")
        template = templates.get(grader_id)  # type: ignore[arg-type]
        extra = len(result) - _KEYS
        if template is not None and (extra == 0 or (extra == 1 and "diagnostics" in result)):
            try:  # every field of the schema there (with the count: no other), each as implied
                status, message, threshold = result["status"], result["message"], result["threshold"]
                # The threshold of the same type too: 1 == 1.0, but the two encode differently.
                if (message.__class__ is str and threshold == template["threshold"]
                        and threshold.__class__ is template["threshold"].__class__
                        and result["implementation"] == template["implementation"]
                        and result["unit"] == template["unit"] and result["direction"] == template["direction"]
                        and result["thresholdOutcome"] == (None if threshold is None else _OUTCOMES.get(status))):
                    entries.append((grader_id, result["value"], status, message,
                                    None if extra == 0 else {"diagnostics": result["diagnostics"]}))
                    continue
            except KeyError:
                pass  # a field of the schema missing: kept whole
        entries.append((grader_id, result.get("value"), result.get("status"), "", {ENTRY_RESULT: dict(result)}))
    return entries


_OUTCOMES: Final = {STATUS_PASS: THRESHOLD_MET, STATUS_FAIL: THRESHOLD_MISSED}


def grader_entries(
    session: Sequence[Mapping[str, Any]], config: GradersConfig, manifest: Mapping[str, Any], *,
    expected: Any = None, lookups: SessionLookups | None = None, kind: type[tuple[Any, ...]] = tuple,
) -> list[Entry] | None:
    """:func:`record_entries` of :func:`grader_results`, made without the result dicts, or None
    when ``config`` has custom graders (then grade through :func:`grader_results`).

    What a trial's grading keeps of a built-in's result is its entry; the nine-key dict that
    :func:`_filled` copies, and that :func:`record_entries` then compares back to the manifest,
    cost ~5 k instructions per grader, ten per trial graded (bench/perf16_gfile.md, session 9
    (gshare)). A step whose template the manifest implies (:class:`_Compact`, once per run)
    gets its entry straight from :func:`_settled`; any other result is still made whole and
    passed through :func:`record_entries`, so the entries are those of the results, exactly.
    ``kind`` is the tuple type the settled entries are made as: the caller's record type of the
    same layout (grading's ``GraderValue``), so they need no copy (graders import only session)."""
    steps = _PLAN.of(config)
    if len(steps) != len(config.enabled):
        return None
    shared = new_tuple(GraderInput, (session, lookups if lookups is not None else create_session_lookups(session),
                                     _NO_CONFIG, expected))
    compact, last = _COMPACT.of(steps, manifest, kind)
    if len(session) < SMALL_PASS:  # as run_builtin_graders
        return _entries(steps, compact, last, shared, manifest, kind)
    with paused_gc(len(session)):
        return _entries(steps, compact, last, shared, manifest, kind)


def _entries(steps: tuple[_Step, ...], compact: tuple[bool, ...], last: _Last, shared: GraderInput,
             manifest: Mapping[str, Any], kind: type[tuple[Any, ...]]) -> list[Entry]:
    """:func:`_run_steps`' results as entries, in one loop (see :func:`grader_entries`).

    ``last`` holds, per step, the measurement it gave last and its entry: a grader that returns
    the same measurement object again (the defaults share one per case that depends on nothing
    but the case: no tool calls, no MCP events, one request; :mod:`mst.graders.builtins`) gets
    the same entry, an immutable tuple, without settling it again. Held by reference, so an
    object is never mistaken for a freed one at the same address."""
    entries: list[Entry] = []
    for i, (spec, compute, template, own) in enumerate(steps):
        error: str | None = None
        try:
            measurement = compute(shared if own is None else shared._replace(config=own))
        except Exception as exc:  # as _run_steps: an error result naming the grader
            value, message, error = None, "", f"{type(exc).__name__}: {exc}"
        else:
            held = last[i]
            if measurement is held[0]:
                entries.append(held[1])  # type: ignore[arg-type]  # an entry: set with its measurement
                continue
            value, message = measurement
        if compact[i] and message.__class__ is str:  # a message of another type is kept whole
            value, status, message, _ = _settled(spec, value, message, error)
            entry = new_tuple(kind, (spec.id, value, status, message, None))
            if error is None:
                last[i] = (measurement, entry)  # one assignment: a grading thread sees both or neither
            entries.append(entry)
        else:
            entries.extend(record_entries(manifest, (_filled(template, spec, value, message, error),)))
    return entries


# Per step, its last measurement and entry; a slot starts with a sentinel no grader returns.
_Last = list[tuple[object, Entry | None]]
_NOTHING_YET: Final[tuple[object, Entry | None]] = (object(), None)


class _Compact:
    """Per step of the plan used last, whether the manifest implies its results' fixed fields
    (the step's template reduces to an entry without ``detail``: :func:`record_entries`' own
    test, so the rule has one home), and the step's last measurement and entry (see
    :func:`_entries`). Held as one tuple, as :class:`_Plan`: another plan, manifest or kind of
    entry starts with none kept."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: tuple[tuple[_Step, ...] | None, Mapping[str, Any] | None, type | None, tuple[bool, ...],
                         _Last] = (None, None, None, (), [])

    def of(self, steps: tuple[_Step, ...], manifest: Mapping[str, Any],
           kind: type[tuple[Any, ...]]) -> tuple[tuple[bool, ...], _Last]:
        held = self.held
        if held[0] is not steps or held[1] is not manifest or held[2] is not kind:
            flags = tuple(record_entries(manifest, (step[2],))[0][4] is None for step in steps)
            held = self.held = (steps, manifest, kind, flags, [_NOTHING_YET] * len(steps))
        return held[3], held[4]


_COMPACT: Final = _Compact()


def _outcome(threshold: Any, status: Any) -> str | None:
    """The threshold outcome a status implies, for a grader with ``threshold`` (see :func:`make_result`)."""
    return None if threshold is None else _OUTCOMES.get(status)


def result_of_entry(manifest: Mapping[str, Any], grader_id: str, value: Any, status: Any, message: str,
                    detail: Mapping[str, Any] | None) -> dict[str, Any]:
    """The full schema-v2 result a record's entry stands for (the inverse of :func:`record_entry`),
    its fields in the schema's order. Raises ValueError when the manifest has no such grader."""
    whole = detail.get(ENTRY_RESULT) if detail else None
    if whole is not None:
        return dict(whole)
    template = _TEMPLATES.of(manifest).get(grader_id)
    if template is None:
        raise ValueError(f"grader {grader_id!r} is not in the grader manifest")
    result = template.copy()
    result["value"], result["status"], result["message"] = value, status, message
    result["thresholdOutcome"] = _outcome(template["threshold"], status)
    if detail and "diagnostics" in detail:
        result["diagnostics"] = detail["diagnostics"]
    return result


def manifest_digest(manifest_json: bytes) -> str:
    """The name a manifest is stored under (``manifest-<digest>.json``): its encoding's sha256,
    16 hex digits. Content-addressed, so a resumed grading with other thresholds adds a second."""
    return hashlib.sha256(manifest_json).hexdigest()[:16]


def manifest_file_bytes(manifest: Mapping[str, Any]) -> bytes:
    """A manifest file's bytes: indented, in the manifest's own key order (not sorted, as other
    run files are), so that read back and encoded it gives the ``grader.manifest`` event's data
    byte for byte."""
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"


def documents_of(events: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The manifest and the results that a graded session's ``grader.manifest`` and
    ``grader.result`` events hold (the inverse of :meth:`GraderRun.events`); other events are
    the transcript's and are skipped."""
    manifest: dict[str, Any] | None = None
    results: list[dict[str, Any]] = []
    for event in events:
        kind = event.get("type")
        if kind == MANIFEST_EVENT:
            manifest = dict(event.get("data") or {})
        elif kind == RESULT_EVENT:
            results.append(dict(event.get("data") or {}))
    return manifest, results
