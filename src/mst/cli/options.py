"""Options shared by several commands, so each is declared once."""

from __future__ import annotations

from pathlib import Path

import click

from mst.cli.handling import F
from mst.statistics import CONFIDENCE

# One path type for every path argument and option: a click type holds no per-use state, and each
# ``click.Path`` made looks up its translated labels through ``gettext`` (a locale search per
# call), ten times at every start of `mst` before (bench/perf16_startup.md, session 9).
PATH = click.Path(path_type=Path)


def confidence_option(fn: F) -> F:
    """``--confidence``: the level of every interval and test (default 0.95), in [0.5, 1)."""
    return click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=CONFIDENCE,
                        show_default=True, help="Confidence level of every interval and test.")(fn)
