"""User errors: a wrong input named by file, place and what was expected — never a traceback.

A leaf module (it imports nothing from mst), so any layer may raise them; the CLI prints each
problem on one line and exits :data:`EXIT_USER`. The exit codes of ``mst`` are defined here, once,
because both the library (a run's outcome) and the CLI need them; README's table lists them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_USER: Final = 2
EXIT_INCOMPLETE: Final = 3
EXIT_REGRESSION: Final = 4
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final = {
    EXIT_OK: "completed: every case is complete (passed or failed)",
    EXIT_INTERNAL: "internal error in mst (a bug)",
    EXIT_USER: "user error: bad eval file, bad run directory, bad arguments",
    EXIT_INCOMPLETE: "completed with incomplete cases: infrastructure failures or ungraded trials remain",
    EXIT_REGRESSION: "a regression: `mst gate RUN` or `mst run … --fail-on-regression` found a candidate "
                     "significantly worse than the baseline",
    EXIT_INTERRUPTED: "interrupted; the run is resumable",
}
"""Every exit status of ``mst`` and what it means (stable, for CI gates)."""


@dataclass(frozen=True)
class Problem:
    file: str
    message: str
    path: str = ""  # a field path such as variants[1].settings.mock.successRate
    line: int | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class UserError(Exception):
    """Bad input from the user. The CLI prints each problem on one line and exits 2."""

    def __init__(self, problems: list[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = problems
        super().__init__("\n".join(str(p).lstrip(": ") for p in problems))
