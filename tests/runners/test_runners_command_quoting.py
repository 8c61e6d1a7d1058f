"""The command runner quotes the worker's argv exactly where a shell reads it."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.helpers import load, run_cli
from tests.runners.runners_helpers import assert_same_files, collected_run, judged_eval, new_run, normalized_run

from mst.runners.command import expand

ARGV = ["/opt/my python/bin/python", "-m", "mst", "grade-shard", "--bundle", "-", "--results", "-"]
LINE = shlex.join(ARGV)


def test_a_shell_gets_one_quoted_command_line() -> None:
    assert expand("bash -c {argv}", ARGV) == ["bash", "-c", LINE]
    assert expand("sh -lc {argv}", ARGV) == ["sh", "-lc", LINE]
    assert expand("kubectl exec -i pod -- sh -c {argv}", ARGV) == ["kubectl", "exec", "-i", "pod", "--", "sh", "-c",
                                                                  LINE]
    assert expand("sh -c 'cd /srv && {argv}'", ARGV) == ["sh", "-c", f"cd /srv && {LINE}"]
    assert expand("my-launcher --script {argv_quoted}", ARGV) == ["my-launcher", "--script", LINE]


def test_ssh_gets_each_word_quoted_and_direct_exec_gets_the_words() -> None:
    ssh = expand("ssh -T gpu-box {argv}", ARGV)
    assert ssh == ["ssh", "-T", "gpu-box", *map(shlex.quote, ARGV)]
    assert shlex.split(" ".join(ssh[3:])) == ARGV  # what the remote shell makes of ssh's joined words
    assert expand("docker exec -i box {argv}", ARGV) == ["docker", "exec", "-i", "box", *ARGV]
    assert expand("kubectl exec -i pod -- {argv}", ARGV) == ["kubectl", "exec", "-i", "pod", "--", *ARGV]
    assert expand("sh -c 'exec \"$@\"' worker {argv}", ARGV) == ["sh", "-c", 'exec "$@"', "worker", *ARGV]


def test_a_grade_in_two_shards_through_bash_c(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=4))
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    assert run_cli("grade", str(source), cwd=tmp_path).returncode == 0
    local = new_run(source.parent, before)
    before.add(local)
    proc = run_cli("grade", str(source), "--runner", "command", "--runner-option", "shards=2",
                   "--runner-option", "template=bash -c {argv}", "--runner-option", "hello_timeout=30",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    remote = new_run(source.parent, before)
    runner = load(remote / "run.json")["grading"]["runner"]
    assert runner["name"] == "command" and [s["shard"] for s in runner["shards"]] == [1, 2]
    assert all(s["machine"] is not None for s in runner["shards"])  # both said hello
    assert_same_files(normalized_run(remote), normalized_run(local))
