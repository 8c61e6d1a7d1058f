"""A sharded regrade replays what its shards computed: the coordinator runs no grader (docs/grading.md)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import load, run_cli
from tests.runners.runners_helpers import assert_same_files, collected_run, judged_eval, new_run, normalized_run

from mst.graders import documents_of
from mst.runs.graded import graded_session

# Loaded by every Python process started with this PYTHONPATH (the CLI and its shard workers):
# each start of a custom grader's bounded process is logged with who started it.
HOOK = '''
import os, sys
import mst.graders.custom.bounded as bounded

_real = bounded.run_bounded

def _counted(*args, **kwargs):
    role = "worker" if "grade-shard" in sys.argv else "coordinator"
    with open({log!r}, "a") as fh:
        fh.write(f"{{role}} {{os.getpid()}}\\n")
    return _real(*args, **kwargs)

bounded.run_bounded = _counted
'''

SCRIPT = '#!/usr/bin/env bash\nset -euo pipefail\necho "[{\\"id\\":\\"score\\",\\"value\\":3}]"\n'


def _starts(log: Path) -> Counter[str]:
    return Counter(line.split()[0] for line in log.read_text().splitlines()) if log.exists() else Counter()


def test_a_sharded_regrade_runs_no_grader_on_the_coordinator(tmp_path: Path) -> None:
    (tmp_path / "value.sh").write_text(SCRIPT)
    path = judged_eval(tmp_path, cases=5, pairwise=False, graders={"operational-value": {"run": "value.sh"}})
    source = collected_run(tmp_path, path)
    hook, log = tmp_path / "hook", tmp_path / "starts.log"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.format(log=str(log)))
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}
    trials = 5 * 2 * 2  # cases × trials × variants

    before = {p for p in source.parent.iterdir() if p.is_dir()}
    assert run_cli("grade", str(source), cwd=tmp_path, env=env).returncode == 0
    local = new_run(source.parent, before)
    assert _starts(log) == Counter({"coordinator": trials})  # the hook counts: locally, each trial once
    log.unlink()

    before = {p for p in source.parent.iterdir() if p.is_dir()}
    proc = run_cli("grade", str(source), "--runner", "process", "--runner-option", "shards=3", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sharded = new_run(source.parent, before)
    assert _starts(log) == Counter({"worker": trials})  # every grader ran once, in a worker; none here

    files = normalized_run(sharded)
    assert_same_files(files, normalized_run(local))
    [manifest] = [k for k in files if k.startswith("graders/")]
    assert manifest.startswith("graders/manifest-")
    key = next((t["variant"], t["case"], t["trial"]) for t in load(sharded / "results.json")["trials"])
    _, results = documents_of(graded_session(sharded, *key))
    assert [r["value"] for r in results if r["id"] == "operational-value"] == [3.0]


def test_a_worker_rebuilds_the_resolved_eval_from_the_bundle_alone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The coordinator resolves; a worker reads the result as data and resolves nothing again."""
    import mst.graders
    import mst.graders.config
    from mst.config.resolve import resolve_eval
    from mst.runners.bundle import GradeWork, read_bundle, resolved_from, write_grade_bundle
    from mst.runs.run import open_run

    (tmp_path / "value.sh").write_text(SCRIPT)
    path = judged_eval(tmp_path, cases=2, pairwise=False, judge_secrets=["JUDGE_KEY"],
                       graders={"operational-value": {"run": "value.sh"}, "my-metric": {"script": "return 1"}})
    source = open_run(collected_run(tmp_path, path))
    monkeypatch.setattr(sys, "path", list(sys.path))  # resolving imports the eval's judges module here
    try:
        resolved = resolve_eval(path)
        work = GradeWork(trials=[k for k in source.attempts if k[1] == "c0"], keep=[], pairs=[])
        folder = tmp_path / "bundle"
        write_grade_bundle(folder, source, resolved, 0, 1, work, heartbeat=1.0)
    finally:
        sys.modules.pop("judges", None)
    for gone in (path, tmp_path / "value.sh", tmp_path / "judges.py"):  # nothing left to resolve from
        gone.unlink()

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a worker resolved the eval again")

    monkeypatch.setattr(mst.graders, "parse_graders_config", refuse)
    monkeypatch.setattr(mst.graders.config, "parse_graders_config", refuse)
    rebuilt = resolved_from(read_bundle(folder), folder)
    assert rebuilt.graders == resolved.graders
    assert rebuilt.graders.get("operational-value").run_source == SCRIPT
    assert rebuilt.cases == tuple(c for c in resolved.cases if c.id == "c0")
    assert [j.identity for j in rebuilt.cases[0].judges] == [j.identity for j in resolved.cases[0].judges]
    # The judges' secret names travel with them (names only), so a worker's grading narrows to them.
    assert [j.secrets for j in rebuilt.cases[0].judges] == [("JUDGE_KEY",)]
    assert "JUDGE_KEY" in (folder / "bundle.json").read_text()
