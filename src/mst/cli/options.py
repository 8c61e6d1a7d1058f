"""Options shared by several commands, so each is declared once."""

from __future__ import annotations

import click

from mst.cli.handling import F
from mst.statistics import CONFIDENCE


def confidence_option(fn: F) -> F:
    """``--confidence``: the level of every interval and test (default 0.95), in [0.5, 1)."""
    return click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=CONFIDENCE,
                        show_default=True, help="Confidence level of every interval and test.")(fn)
