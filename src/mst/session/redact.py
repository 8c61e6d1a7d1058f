"""Redaction of secrets (and configured patterns): the one piece that removes them, wherever a
text, a JSON value, an ending or a file is about to be written, sent, graded or shown.

Clients, providers and the MCP and CLI helpers redact error messages with
:meth:`Redactor.of` (a request's secrets) and :meth:`Redactor.text` / :meth:`Redactor.ending`;
the collector, grading and shard workers redact transcripts, records and wire lines with a
:class:`Redactor` built from the secrets file and the eval's ``redact`` patterns."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mst.endings import Ending, Infrastructure

REDACTED = "[REDACTED]"


class Redactor:
    """Replaces every secret value (and each configured regex) with ``[REDACTED]``.

    Values shorter than 4 characters are ignored: redacting "1" would shred every number.
    """

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
        self._values = {s for s in secrets if len(s) >= 4}
        self._patterns = list(patterns)
        self._regex = self._compile()

    def _compile(self) -> re.Pattern[str] | None:
        values = sorted(self._values, key=len, reverse=True)
        parts = [re.escape(v) for v in values] + [f"(?:{p})" for p in self._patterns]
        return re.compile("|".join(parts)) if parts else None

    def add(self, secrets: Iterable[str]) -> None:
        """Redact more values from now on (a refreshed credential): everyone holding this
        redactor sees them at once. The shared :data:`NO_REDACTION` is never extended."""
        if self is NO_REDACTION:
            raise ValueError("NO_REDACTION is shared: make a Redactor of your own to add secrets to")
        fresh = {s for s in secrets if len(s) >= 4} - self._values
        if fresh:
            self._values |= fresh
            self._regex = self._compile()  # one assignment: a concurrent reader sees the old or the new

    @classmethod
    def of(cls, secrets: Mapping[str, str]) -> Redactor:
        """The redactor of a request's secrets (name → value): every value is removed."""
        return cls(secrets.values())

    @property
    def active(self) -> bool:
        return self._regex is not None

    def text(self, value: str) -> str:
        if self._regex is None:
            return value
        return self._regex.sub(REDACTED, value)

    def ending(self, ending: Ending) -> Ending:
        """``ending`` with secrets removed from its text (it may quote an exception or a provider's error)."""
        if self._regex is None:
            return ending
        if isinstance(ending, Infrastructure):
            return replace(ending, why=self.text(ending.why))
        return ending if ending.detail is None else replace(ending, detail=self.text(ending.detail))

    def value(self, value: Any) -> Any:
        """Redact strings anywhere inside JSON-like data; returns new containers, never mutates."""
        if self._regex is None:
            return value
        if isinstance(value, str):
            return self._regex.sub(REDACTED, value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def tree(self, root: Path) -> int:
        """Redact secrets in every file under ``root`` (a client's artifacts); returns files changed.

        Bytes that are not UTF-8 survive untouched (surrogateescape), so binary artifacts are
        only rewritten where a secret's text actually occurs in them.
        """
        if self._regex is None:
            return 0
        changed = 0
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            text = path.read_bytes().decode("utf-8", "surrogateescape")
            clean = self._regex.sub(REDACTED, text)
            if clean != text:
                tmp = path.with_name(f".{path.name}.redact.tmp")
                tmp.write_bytes(clean.encode("utf-8", "surrogateescape"))
                os.replace(tmp, path)
                changed += 1
        return changed


NO_REDACTION = Redactor()
