"""Reading the user's input files (eval files, datasets): every failure is an error naming the file."""

from __future__ import annotations

from pathlib import Path

from mst.config.errors import Problem, UserError


def read_file(path: Path, kind: str = "file", expected: str = "a YAML file") -> bytes:
    """A file's bytes, or a :class:`UserError` naming it: missing, a directory, a symlink loop,
    unreadable, or a path that cannot be one (a NUL byte)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(Problem(str(path), f"{kind} not found")) from None
    except IsADirectoryError:
        raise UserError(Problem(str(path), f"is a directory, expected {expected}")) from None
    except OSError as exc:
        raise UserError(Problem(str(path), f"cannot read the {kind}: {exc.strerror or exc}")) from None
    except ValueError as exc:
        raise UserError(Problem(repr(str(path)), f"not a usable path: {exc}")) from None


def decode_utf8(raw: bytes, file: str) -> str:
    """The text of a file that must be UTF-8 (a BOM is dropped), or an error naming its line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError(Problem(file, f"not UTF-8 text (byte {exc.start}: {raw[exc.start]:#04x})",
                                line=line)) from None
