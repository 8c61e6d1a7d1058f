"""`--secrets-file`: a dotenv file of keys for clients and judges.

Values are only ever held in memory and in the environment of the processes that need them;
error messages name the file and line, never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from mst.config.errors import Problem, UserError

_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def load_secrets(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Problem(str(path), "secrets file not found")) from None
    except UnicodeDecodeError:
        raise UserError(Problem(str(path), "secrets file is not UTF-8 text")) from None
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if match is None:
            raise UserError(Problem(str(path), "expected NAME=value (the value is not shown)", line=lineno))
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[name] = value
    return out


@contextmanager
def in_environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment, and the earlier values back after: judges
    read their keys from the environment, as they would in a grade worker."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
