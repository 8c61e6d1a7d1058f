"""The eval file: YAML → pydantic models, datasets, secrets, plugins, and resolution.

Loading (:func:`load_eval`) checks the file against the models and names every problem by file,
field and line (:class:`UserError` of :class:`Problem`); resolution (:func:`resolve_eval`, on the
coordinator only) reads datasets and lets each plugin check its own settings, so everything after
it reads a :class:`ResolvedEval`. Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mst._lazy import lazy_exports

if TYPE_CHECKING:
    from mst.config.datasets import load_dataset
    from mst.config.errors import Problem, UserError
    from mst.config.load import EvalFile, load_eval
    from mst.config.models import CaseConfig, EvalConfig, JudgeConfig, PairwiseConfig, VariantConfig
    from mst.config.resolve import resolve_eval
    from mst.config.resolved import ResolvedCase, ResolvedEval, ResolvedJudge
    from mst.config.secrets import load_secrets

_EXPORTS = {
    "Problem": "mst.config.errors",
    "UserError": "mst.config.errors",
    "EvalFile": "mst.config.load",
    "load_eval": "mst.config.load",
    "CaseConfig": "mst.config.models",
    "EvalConfig": "mst.config.models",
    "JudgeConfig": "mst.config.models",
    "PairwiseConfig": "mst.config.models",
    "VariantConfig": "mst.config.models",
    "resolve_eval": "mst.config.resolve",
    "ResolvedCase": "mst.config.resolved",
    "ResolvedEval": "mst.config.resolved",
    "ResolvedJudge": "mst.config.resolved",
    "load_dataset": "mst.config.datasets",
    "load_secrets": "mst.config.secrets",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CaseConfig",
    "EvalConfig",
    "EvalFile",
    "JudgeConfig",
    "PairwiseConfig",
    "Problem",
    "ResolvedCase",
    "ResolvedEval",
    "ResolvedJudge",
    "UserError",
    "VariantConfig",
    "load_dataset",
    "load_eval",
    "load_secrets",
    "resolve_eval",
]
