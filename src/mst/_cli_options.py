"""Options shared by several commands, so each is declared once (the CLI package's small leaf)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from mst.statistics import CONFIDENCE

F = TypeVar("F", bound=Callable[..., Any])


def confidence_option(fn: F) -> F:
    """``--confidence``: the level of every interval and test (default 0.95), in [0.5, 1)."""
    return click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=CONFIDENCE,
                        show_default=True, help="Confidence level of every interval and test.")(fn)
