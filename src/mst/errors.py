"""User errors: a wrong input named by file, place and what was expected — never a traceback.

A leaf module (it imports nothing from mst), so any layer may raise them; the CLI prints each
problem on one line and exits 2."""

from __future__ import annotations

from dataclasses import dataclass


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
