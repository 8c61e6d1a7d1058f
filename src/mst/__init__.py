"""mst: evaluate AI agents and clients on eval cases, with honest statistics.

The public API, importable from here (each name is imported on first use, so ``import mst``
and ``mst --version`` stay instant):

* running — :func:`run_eval`, :func:`resume_run`, :func:`grade` (a regrade), :func:`resolve_eval`;
* the eval file — :class:`EvalConfig`, :class:`ResolvedEval`, :class:`UserError`, :class:`Problem`;
* endings — :data:`Ending` = :class:`Trial` | :class:`Infrastructure`, :class:`EndingException`;
* judges — :class:`Verdict`, :class:`TrialView`, :class:`CaseView`;
* plugins — the :class:`Client` protocol (with :class:`AttemptRequest`, :class:`AttemptOutcome`)
  and the :class:`Runner` base class (with :class:`ShardSpec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mst._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mst.api import grade, resume_run, run_eval
    from mst.clients.base import AttemptOutcome, AttemptRequest, Client
    from mst.config.errors import Problem, UserError
    from mst.config.models import EvalConfig
    from mst.config.resolve import resolve_eval
    from mst.config.resolved import ResolvedEval
    from mst.endings import Ending, EndingException, Infrastructure, InfraWhat, Trial, TrialOutcome
    from mst.grading.judges import CaseView, TrialView, Verdict
    from mst.runners.base import Runner, ShardSpec

_EXPORTS = {
    "run_eval": "mst.api",
    "resume_run": "mst.api",
    "grade": "mst.api",
    "resolve_eval": "mst.config.resolve",
    "EvalConfig": "mst.config.models",
    "ResolvedEval": "mst.config.resolved",
    "UserError": "mst.config.errors",
    "Problem": "mst.config.errors",
    "Ending": "mst.endings",
    "Trial": "mst.endings",
    "Infrastructure": "mst.endings",
    "TrialOutcome": "mst.endings",
    "InfraWhat": "mst.endings",
    "EndingException": "mst.endings",
    "Verdict": "mst.grading.judges",
    "TrialView": "mst.grading.judges",
    "CaseView": "mst.grading.judges",
    "Client": "mst.clients.base",
    "AttemptRequest": "mst.clients.base",
    "AttemptOutcome": "mst.clients.base",
    "Runner": "mst.runners.base",
    "ShardSpec": "mst.runners.base",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "AttemptOutcome",
    "AttemptRequest",
    "CaseView",
    "Client",
    "Ending",
    "EndingException",
    "EvalConfig",
    "InfraWhat",
    "Infrastructure",
    "Problem",
    "ResolvedEval",
    "Runner",
    "ShardSpec",
    "Trial",
    "TrialOutcome",
    "TrialView",
    "UserError",
    "Verdict",
    "__version__",
    "grade",
    "resolve_eval",
    "resume_run",
    "run_eval",
]
