"""Local replay (docs/graders.md, "Replay"): the same ``run_graders`` the grading phase uses, fed from files.

The CLI owns reading files; this module turns what it read into a configuration and a run, so
the replay path and the grading phase differ only in where the session came from. A config
document may be the eval's ``graders:`` mapping, a mapping with a top-level ``graders`` key, or
a persisted ``grader_manifest.json`` (schema version 2), which keeps disabled defaults disabled.
A mapping with a ``graders`` key is always read as the wrapped form (an eval file, say), so a
custom grader with the id ``graders`` must be given in that form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mst.graders.config import GradersConfig, config_from_manifest, parse_graders_config
from mst.graders.results import GraderRun, run_graders

# Keys only an eval file has (no grader id is spelled like these), so an eval file given as
# `--config` reads as the eval's own `graders:` setting.
_EVAL_KEYS = frozenset({"variants", "cases", "datasets", "trials"})


def config_from_document(doc: Any, *, base_dir: Path | None = None) -> GradersConfig:
    """Interpret a loaded config file (see the module docstring); None means the defaults."""
    if isinstance(doc, Mapping) and "schemaVersion" in doc and isinstance(doc.get("graders"), list):
        return config_from_manifest(doc)
    if isinstance(doc, Mapping) and "graders" in doc:
        doc = doc["graders"]
    elif isinstance(doc, Mapping) and _EVAL_KEYS & doc.keys():
        doc = None  # an eval file without `graders:` grades with the defaults, as `mst run` does
    return parse_graders_config(doc, base_dir=base_dir)


def replay(
    session: Sequence[Mapping[str, Any]],
    config_doc: Any = None,
    *,
    base_dir: Path | None = None,
    expected: Any = None,
) -> GraderRun:
    """Grade a session read from disk exactly as the grading phase would."""
    return run_graders(session, config_from_document(config_doc, base_dir=base_dir), expected=expected)
