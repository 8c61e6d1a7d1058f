"""Which shard a case belongs to: stable on every machine and Python version.

``hash()`` is salted per process, so a coordinator and a worker (or two coordinators resuming
one run) would disagree; a sha256 of the case id does not. A shard holds whole cases, with all
their variants and trials, so a case's pairwise comparisons have both sides on one machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def shard_of(case_id: str, count: int) -> int:
    """The shard (0-based) of ``case_id`` among ``count`` shards."""
    if count < 1:
        raise ValueError("a shard count is at least 1")
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def split_cases(case_ids: Iterable[str], count: int) -> list[list[str]]:
    """Case ids per shard, each in the order given."""
    shards: list[list[str]] = [[] for _ in range(count)]
    for case_id in case_ids:
        shards[shard_of(case_id, count)].append(case_id)
    return shards
