"""Seeded mutations of real inputs (eval files, datasets, sessions) for the fuzz tests.

Each mutation is a pure function of a :class:`random.Random` and the input's bytes, so a failing
input is reproduced from its seed and index alone. The tokens are what broke the loader before:
explicit tags with bad values, aliases and alias bombs, deep nesting, numbers beyond 64 bits,
control characters and invalid UTF-8, YAML document markers, and values of the wrong type.
"""

from __future__ import annotations

import random
import resource
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

TOKENS: tuple[bytes, ...] = (
    b"!!int abc", b"!!float abc", b"!!bool maybe", b"!!timestamp 1", b"!!binary ###", b"!!set", b"!!omap",
    b"!!python/object:os.system", b"!<tag:x.y,2000:z>", b"!local", b"&a ", b"*a", b"*undefined", b"<<: *a",
    b"&x [*x]", b"18446744073709551616", b"123456789012345678901234567890", b"-9223372036854775809",
    b"1" * 5000, b"1e999", b".nan", b"-.inf", b"2024-13-45", b"0x", b"0o9", b"\x00", b"\x01", b"\x1b",
    b"\x7f", b"\xc2\x85", b"\xff", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\t", b"\r", b"\r\n", b"---\n",
    b"...\n", b"%YAML 1.1\n", b"%TAG ! tag:x,1:\n", b"? ", b": ", b"- ", b"'", b'"', b"\\", b"#", b"|",
    b">", b"~", b"null", b"true", b"[]", b"{}", b"[", b"{", b"]", b"}", b",", b"-1", b"0", b"''",
)

HOSTILE_VALUES: tuple[Any, ...] = (
    None, 0, -1, 2**64, 2**63, -(2**63) - 1, 1.5, float("nan"), float("inf"), True, "", "x" * 10_000,
    [], {}, [None], {"unknown": 1}, "sk-canary", "../../etc/passwd", "a\x00b", "\u202e", "{expected}",
    "{expected[0][1]}", "mock", "not:a:target", "$.x[", "(", "*", 10**20,
)


def bomb(levels: int = 9, width: int = 9) -> str:
    """A YAML alias bomb as a flow mapping: ``levels`` anchors, each ``width`` aliases of the last."""
    parts = ["a0: &a0 [lol]"]
    parts += [f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]" for k in range(1, levels + 1)]
    return "{" + ", ".join(parts) + "}"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def flip(rng: random.Random, raw: bytes) -> bytes:
    if not raw:
        return raw
    i = rng.randrange(len(raw))
    return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1:]


def delete(rng: random.Random, raw: bytes) -> bytes:
    if not raw:
        return raw
    i = rng.randrange(len(raw))
    return raw[:i] + raw[i + rng.randint(1, 40):]


def duplicate(rng: random.Random, raw: bytes) -> bytes:
    if not raw:
        return raw
    i = rng.randrange(len(raw))
    j = min(len(raw), i + rng.randint(1, 200))
    return raw[:j] + raw[i:j] + raw[j:]


def insert(rng: random.Random, raw: bytes) -> bytes:
    i = rng.randrange(len(raw) + 1)
    return raw[:i] + rng.choice(TOKENS) + raw[i:]


def after_colon(rng: random.Random, raw: bytes) -> bytes:
    """A token (or a bomb, or deep nesting) as the value of a random mapping key."""
    spots = [i + 2 for i in range(len(raw) - 1) if raw[i:i + 2] == b": "]
    if not spots:
        return insert(rng, raw)
    i = rng.choice(spots)
    end = raw.find(b"\n", i)
    end = len(raw) if end < 0 else end
    depth = rng.choice([99, 100, 101, 1000, 20_000])
    value = rng.choice([rng.choice(TOKENS), bomb().encode(), bomb(4, 4).encode(), nested(depth).encode()])
    return raw[:i] + value + raw[end:]


MUTATORS: tuple[Callable[[random.Random, bytes], bytes], ...] = (flip, delete, duplicate, insert, insert, after_colon)


def mutate_bytes(rng: random.Random, raw: bytes) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        raw = rng.choice(MUTATORS)(rng, raw)
    return raw


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def mutate_document(rng: random.Random, doc: Any) -> Any:
    """A copy of a parsed document with one value of the wrong type, a key deleted or added."""
    doc = _copy(doc)
    path = rng.choice(list(_paths(doc)))
    if not path:
        return rng.choice(HOSTILE_VALUES)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    action = rng.random()
    if action < 0.15 and isinstance(parent, dict):
        del parent[path[-1]]
    elif action < 0.25 and isinstance(parent, dict):
        parent[rng.choice(["unknown", "typo", "Name", "1"])] = rng.choice(HOSTILE_VALUES)
    else:
        parent[path[-1]] = _copy(rng.choice(HOSTILE_VALUES))
    return doc


def mutate_yaml(rng: random.Random, raw: bytes) -> bytes:
    """A mutated YAML file: mostly byte-level, sometimes a structural change written back."""
    if rng.random() < 0.3:
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError:
            return mutate_bytes(rng, raw)
        return yaml.safe_dump(mutate_document(rng, doc), sort_keys=False, allow_unicode=True).encode()
    return mutate_bytes(rng, raw)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class FuzzLog:
    """The failures of one fuzz run, with its bounds: each failing input is kept (named in the
    message, so it can be read again), an input over ``limit_seconds`` fails, and the peak memory
    of the process may grow by at most ``limit_bytes`` over the run."""

    def __init__(self, tmp_path: Path, seed: int, limit_seconds: float, limit_bytes: int) -> None:
        self.tmp_path, self.seed = tmp_path, seed
        self.limit_seconds, self.limit_bytes = limit_seconds, limit_bytes
        self.failures: list[str] = []
        self._rss_before = _peak_rss()

    def record(self, i: int, path: Path, problem: str | None, started: float) -> None:
        """Input ``i`` (the file ``path``, checked from ``started`` on) ended with ``problem``."""
        elapsed = time.monotonic() - started
        if problem is None and elapsed > self.limit_seconds:
            problem = f"took {elapsed:.1f} s"
        if problem is not None:
            kept = self.tmp_path / f"failure-{i}{path.suffix}"
            shutil.copy(path, kept)
            self.failures.append(f"seed {self.seed}, input {i} (kept in {kept}): {problem}")

    def assert_clean(self, count: int, what: str) -> None:
        assert not self.failures, f"{len(self.failures)} of {count} {what} failed:\n" + "\n".join(self.failures[:5])
        grown = _peak_rss() - self._rss_before
        assert grown < self.limit_bytes, f"peak memory grew by {grown / 2**20:.0f} MB"


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
