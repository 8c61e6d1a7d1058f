"""The registry of built-in graders: the ten defaults, then the opt-in trajectory analyses.

Registry order is the order results are reported in, so it never depends on configuration
order: the same session and configuration always produce the same result list.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from mst.graders.base import BuiltinGrader
from mst.graders.builtins import DEFAULT_GRADERS
from mst.graders.trajectory import TRAJECTORY_GRADERS

OPERATIONAL_VALUE: Final = "operational-value"

BUILTINS: Final = MappingProxyType({g.id: g for g in (*DEFAULT_GRADERS, *TRAJECTORY_GRADERS)})
DEFAULT_IDS: Final = tuple(g.id for g in DEFAULT_GRADERS)
OPT_IN_IDS: Final = tuple(g.id for g in TRAJECTORY_GRADERS)


def builtin(grader_id: str) -> BuiltinGrader | None:
    return BUILTINS.get(grader_id)
