"""Memory per case of `mst run` stays small: a run of many cases with one trial each (issue 16).

Measured as in ``test_memory_flat``: tracemalloc's peak while a whole run goes, at two sizes,
here with one trial per case, so every extra attempt is also an extra case. What an extra case
costs (its resolved definition, its slots in the key index, its summary counts, its share of
the dataset) must stay a few hundred bytes: a resolved case holding decoded copies it does not
need, eight key slots per variant and case, or per-case objects kept for the summary fail this.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from tests.runs.test_memory_flat import _eval

from mst import fileio
from mst.api import run_eval

pytestmark = pytest.mark.slow

# Bytes of peak traced memory per extra case (one trial of each of two variants). Measured
# 4,327 before the key index gave trial 0 a slot of its own and run.json's per-case parts were
# kept as bytes, 3,194 after (bench/perf_memory.md), 1,650 after the per-case parts, the cases'
# tasks and the grading names were kept compact (bench/perf16_memory.md), 1,354 at 4a055b3 and
# 1,117 after the key index numbered each case once, run.json's parts were streamed and read a
# block at a time (session 7); 1,191 at c24285d and 649 after the report's matrix was kept as
# its bytes, the comparison and the pass rates held arrays, and run.json's parts were packed an
# entry at a time (session 9); 619 at c2eca48 and 575 after the summary's columns were coded a
# byte a case, the store's summaries and the judge sets two bytes, and the resume check held
# no sets (session 9, second part; 494 between 1,500 and 4,500 cases); 565 at cb54c55 and 535
# after the resolved cases were kept as columns and their ids not interned (session 10); 459
# after run.json's per-case parts were held deflated (session 11), 301 once grading kept no map
# of every case and both variants' summary columns shared the eval's ids: the issue's aim, 500,
# is met. 274 after session 13's lanes, then 333-335 once a report chunk stopped being joined
# before it was written: the small run's peak (that write, the same for both sizes) fell, so
# the difference of the two peaks shows more of what the big run holds per case.
PER_CASE_LIMIT = 380


def _peak(work: Path, cases: int) -> int:
    eval_path = _eval(work / f"eval-{cases}", 2 * cases, trials=1)
    tracemalloc.start()
    try:
        outcome = run_eval(eval_path, runs_dir=work / f"runs-{cases}")
        assert outcome.summary["totals"]["cases"] == cases
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_per_case_stays_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", 32 * 1024)  # small blocks let small runs show big ones
    _peak(tmp_path, 10)  # modules imported on first use allocate too: load them all first
    small, big = _peak(tmp_path, 300), _peak(tmp_path, 1500)
    per_case = (big - small) / 1200
    assert per_case < PER_CASE_LIMIT, f"mst run: {per_case:.0f} bytes per case (one trial of two variants)"
