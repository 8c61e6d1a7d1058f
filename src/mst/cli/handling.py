"""How every command ends on an error: one clear line per problem and an exit code, never a traceback.

The exit codes are :mod:`mst.errors`' (README, "Exit codes").
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mst.errors import EXIT_INTERRUPTED, EXIT_USER, UserError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """User errors become one line per problem and exit 2; Ctrl-C says the run is resumable (130)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            for problem in exc.problems:
                click.secho(f"error: {str(problem).lstrip(': ')}", fg="red", err=True)
            sys.exit(EXIT_USER)
        except KeyboardInterrupt:
            click.secho("interrupted: the run is resumable with `mst run --resume RUN`", fg="yellow", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]
