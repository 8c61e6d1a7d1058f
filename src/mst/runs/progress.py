"""How long work reports progress; the CLI draws it with rich, the library stays silent."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, phase: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def finish(self) -> None: ...


class Silent:
    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass
