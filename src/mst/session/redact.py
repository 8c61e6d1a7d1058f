"""Redaction of secrets (and configured patterns) before anything is written or graded."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REDACTED = "[REDACTED]"


class Redactor:
    """Replaces every secret value (and each configured regex) with ``[REDACTED]``.

    Values shorter than 4 characters are ignored: redacting "1" would shred every number.
    """

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        parts = [re.escape(v) for v in values] + [f"(?:{p})" for p in patterns]
        self._regex = re.compile("|".join(parts)) if parts else None

    @property
    def active(self) -> bool:
        return self._regex is not None

    def text(self, value: str) -> str:
        if self._regex is None:
            return value
        return self._regex.sub(REDACTED, value)

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
