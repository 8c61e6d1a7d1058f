"""Sharding, the protocol's edge, runner options and the runner registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.helpers import run_cli
from tests.runners.runners_helpers import collected_run, judged_eval

from mst.config.errors import UserError
from mst.runners import registry
from mst.runners.base import Runner, ShardSpec, ShardWorker, parse_options
from mst.runners.command import expand
from mst.runners.protocol import Graded, Hello, Machine, PairKey, encode, parse_coordinator, parse_worker
from mst.runners.sharding import shard_of, split_cases


def test_shard_of_is_stable_across_processes_and_balanced() -> None:
    ids = [f"case-{i}" for i in range(2000)]
    here = [shard_of(c, 4) for c in ids]
    code = "from mst.runners.sharding import shard_of; print([shard_of(f'case-{i}', 4) for i in range(2000)])"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123"}).stdout  # another process, another hash() salt
    assert str(here) == there.strip()
    assert shard_of("c3", 2) == shard_of("c3", 2) and shard_of("anything", 1) == 0
    sizes = [len(s) for s in split_cases(ids, 4)]
    assert sum(sizes) == 2000 and min(sizes) > 400  # roughly even
    with pytest.raises(ValueError):
        shard_of("c", 0)


def test_protocol_round_trips_and_refuses_foreign_lines() -> None:
    hello = Hello(mstVersion="0.1.0", plugins=[], machine=Machine(hostname="h", platform="p", python="3", cpus=2))
    line = encode(hello)
    assert '"mstVersion":"0.1.0"' in line and '"protocol":"mst.shard/v1"' in line
    assert parse_worker(line) == hello
    graded = Graded(key=PairKey(candidate="cand", case="c1"), status="failed", files=[])
    assert parse_worker(encode(graded)) == graded
    for bad in ('{"type":"hello"}', '{"type":"launch-missiles"}', "not json", '{"type":"tokens","secrets":{}}'):
        with pytest.raises(ValueError):
            parse_worker(bad)
    assert parse_coordinator('{"type":"cancel"}').type == "cancel"
    with pytest.raises(ValidationError):
        parse_coordinator('{"type":"cancel","extra":1}')


def test_runner_options_are_checked() -> None:
    options = parse_options(["shards=3", "keep=true", "address=ray://h:1", "hello-timeout=2"], frozenset({"address"}))
    assert (options.shards, options.keep, options.hello_timeout, options.own) == (3, True, 2.0, {"address": "ray://h:1"})
    assert options.public() == {"shards": 3, "keep": True, "address": "ray://h:1"}
    for bad in (["shards=0"], ["shards=x"], ["nope=1"], ["shards"], ["heartbeat=-1"]):
        with pytest.raises(UserError):
            parse_options(bad, frozenset())


def test_command_template_expansion() -> None:
    argv = ["python", "-m", "mst", "grade-shard", "--bundle", "-"]
    assert expand("ssh box {argv}", argv) == ["ssh", "box", *argv]
    assert expand("sh -c 'cd /srv && {argv}'", argv) == ["sh", "-c", "cd /srv && python -m mst grade-shard --bundle -"]
    with pytest.raises(UserError):
        expand("ssh box", argv)


class CollectOnly(Runner):
    name = "collect-only"
    work = frozenset({"collect"})
    closed = False

    def start(self, spec: ShardSpec, workdir: Path) -> ShardWorker:
        raise AssertionError("no shard may start")

    def close(self) -> None:
        CollectOnly.closed = True


def test_grade_refuses_a_runner_without_grade_before_any_shard(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from mst import api as pipeline

    source = collected_run(tmp_path, judged_eval(tmp_path, cases=2))
    monkeypatch.setitem(registry.BUILTIN, "collect-only", f"{__name__}:CollectOnly")
    monkeypatch.setattr(sys, "path", list(sys.path))  # resolving imports the eval's judges module here:
    try:  # keep it out of later tests, which have their own `judges`
        with pytest.raises(UserError, match="runner 'collect-only' cannot grade: it runs collect"):
            pipeline.grade(source, runner="collect-only")
    finally:
        sys.modules.pop("judges", None)
    assert CollectOnly.closed
    assert [p for p in source.parent.iterdir() if p.is_dir()] == [source]  # no regrade was begun


def test_unknown_runner_and_too_many_shards_are_user_errors(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=2))
    proc = run_cli("grade", str(source), "--runner", "nope", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown runner 'nope'" in proc.stderr and "process" in proc.stderr
    proc = run_cli("grade", str(source), "--runner", "process", "--runner-option", "shards=100000", cwd=tmp_path)
    assert proc.returncode == 2 and "at most 256 shards" in proc.stderr
