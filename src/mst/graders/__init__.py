"""Deterministic graders (docs/graders.md): pure execution metrics over a unified session.

Public API:

* configuration — :func:`parse_graders_config`, :class:`GradersConfig`, :class:`GradersConfigError`;
* grading — :func:`run_graders` → :class:`GraderRun` (manifest, results, events), with the shared
  :func:`create_session_lookups`;
* experiments — :func:`validate_metric_refs`, :func:`analyze_experiment`;
* replay — :func:`replay`, :func:`config_from_document`, :func:`config_from_manifest`.

Graders import only :mod:`mst.session`; nothing here runs user-supplied code.
"""

from mst.graders.base import GraderInput, Measurement
from mst.graders.config import (
    GradersConfig,
    GradersConfigError,
    GraderSpec,
    config_from_manifest,
    parse_graders_config,
)
from mst.graders.experiments import (
    DEFAULT_MIN_SAMPLES,
    Observation,
    analyze_experiment,
    parse_metric_ref,
    validate_metric_refs,
)
from mst.graders.registry import BUILTINS, DEFAULT_IDS, OPERATIONAL_VALUE, OPT_IN_IDS
from mst.graders.replay import config_from_document, replay
from mst.graders.results import (
    RUNTIME_UNAVAILABLE,
    SCHEMA_VERSION,
    GraderRun,
    build_manifest,
    documents_of,
    run_graders,
)
from mst.session.lookups import SessionLookups, create_session_lookups

__all__ = [
    "BUILTINS",
    "DEFAULT_IDS",
    "DEFAULT_MIN_SAMPLES",
    "OPERATIONAL_VALUE",
    "OPT_IN_IDS",
    "RUNTIME_UNAVAILABLE",
    "SCHEMA_VERSION",
    "GraderInput",
    "GraderRun",
    "GraderSpec",
    "GradersConfig",
    "GradersConfigError",
    "Measurement",
    "Observation",
    "SessionLookups",
    "analyze_experiment",
    "build_manifest",
    "config_from_document",
    "config_from_manifest",
    "create_session_lookups",
    "documents_of",
    "parse_graders_config",
    "parse_metric_ref",
    "replay",
    "run_graders",
    "validate_metric_refs",
]
