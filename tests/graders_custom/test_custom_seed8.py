"""Custom graders (docs/graders.md, "Custom graders run apart"): custom source excluded from the built-in phase, bounded
execution, credential stripping, session-file input, legacy metric output; plus the combination
of custom and built-in results and the replay CLI using the same isolated runtimes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from customkit import needs_isolation, sample_session

from mst.graders import parse_graders_config, run_graders
from mst.graders.custom import js as js_runtime
from mst.graders.custom.bash_run import BashLimits, parse_metrics, run_operational_value
from mst.graders.results import run_builtin_graders
from mst.session.lookups import create_session_lookups

HEAD = "#!/usr/bin/env bash\nset -euo pipefail\n"
CANARY = "MST_CANARY_CREDENTIAL"


def _metrics(*pairs: tuple[str, str]) -> str:
    body = ",".join(f'{{\\"id\\":\\"{k}\\",\\"value\\":{v}}}' for k, v in pairs)
    return f'echo "[{body}]"\n'


# --- exclusion from the built-in phase -----------------------------------------------------------


def test_builtin_phase_never_runs_custom_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "v.sh").write_text(HEAD + _metrics(("v", "1")))
    config = parse_graders_config({"my-metric": {"script": "return 1"}, "operational-value": {"run": "v.sh"}},
                                  base_dir=tmp_path)  # fmt: skip

    def no_processes(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the built-in phase started a process")

    monkeypatch.setattr(subprocess, "Popen", no_processes)
    session = sample_session()
    results = run_builtin_graders(session, config, create_session_lookups(session))
    assert "my-metric" not in results and "operational-value" not in results
    assert set(results) == {s.id for s in config.enabled if s.kind == "builtin"}


def test_manifest_never_carries_custom_source(tmp_path: Path) -> None:
    (tmp_path / "v.sh").write_text(HEAD + "# marker-in-bash\n" + _metrics(("v", "1")))
    config = parse_graders_config({"my-metric": {"script": "return 1 // marker-in-js"},
                                   "operational-value": {"run": "v.sh"}}, base_dir=tmp_path)  # fmt: skip
    run = run_graders(sample_session(), config)
    text = orjson.dumps([run.manifest, run.results, run.events()]).decode()
    assert "marker-in-js" not in text and "marker-in-bash" not in text


@needs_isolation
def test_custom_results_join_builtins_without_overwriting_them() -> None:
    session = sample_session()
    plain = run_graders(session, parse_graders_config(None)).results
    mixed = run_graders(session, parse_graders_config({"zz-custom": {"script": "return 42"}})).results
    assert mixed[: len(plain)] == plain
    assert mixed[-1]["id"] == "zz-custom" and mixed[-1]["value"] == 42.0
    assert mixed[-1]["implementation"]["sourceDigest"].startswith("sha256:")


@needs_isolation
def test_js_grader_sees_the_same_lookups_as_builtins() -> None:
    session = sample_session()
    lookups = create_session_lookups(session)
    script = "return lookups.toolCalls.filter(c => !c.success).length * 100 + lookups.execution.requests.length"
    config = parse_graders_config({"probe": {"script": script}})
    [result] = [r for r in run_graders(session, config).results if r["id"] == "probe"]
    failed = sum(1 for c in lookups.tool_calls if not c.success)
    assert result["value"] == failed * 100 + len(lookups.execution.requests)


@needs_isolation
def test_one_failing_grader_does_not_take_down_the_others() -> None:
    config = parse_graders_config({
        "a-first": {"script": "return 1"},
        "b-bomb": {"script": "const a = []; for (;;) a.push(new Array(1e6).fill(2.5))"},
        "c-last": {"script": "return 3"},
    })  # fmt: skip
    results = {r["id"]: r for r in run_graders(sample_session(), config).results}
    assert results["a-first"]["value"] == 1.0 and results["c-last"]["value"] == 3.0
    assert results["b-bomb"]["status"] == "error" and "memory" in results["b-bomb"]["message"]


@needs_isolation
def test_custom_js_is_deterministic() -> None:
    config = parse_graders_config({"probe": {"script": "return session.length / 7"}})
    assert run_graders(sample_session(), config).results == run_graders(sample_session(), config).results


def test_js_is_refused_when_isolation_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(js_runtime, "_network_prefix", lambda: "this machine does not allow a new network namespace")
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("ran without isolation"))
    [result] = [r for r in run_graders([], parse_graders_config({"probe": {"script": "return 1"}})).results
                if r["id"] == "probe"]  # fmt: skip
    assert result["status"] == "error" and "refused" in result["message"] and "network namespace" in result["message"]


@needs_isolation
def test_network_namespace_cuts_off_a_loopback_server() -> None:
    from customkit import listening_server

    prefix = js_runtime._network_prefix()
    assert isinstance(prefix, tuple)
    with listening_server() as (port, received):
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')"
        done = subprocess.run([*prefix, "/usr/bin/env", "python3", "-c", code], env={"PATH": "/usr/bin:/bin"},
                              capture_output=True, timeout=30, check=False)  # fmt: skip
        time.sleep(0.3)
    assert done.returncode != 0 and received == []


# --- bounded execution ---------------------------------------------------------------------------


def test_bash_timeout_kills_the_process_group() -> None:
    started = time.monotonic()
    outcome = run_operational_value(HEAD + "sleep 30 &\nsleep 30\n", [], {}, BashLimits(timeout=1.0))
    assert outcome.error is not None and "timed out after 1 s" in outcome.error
    assert time.monotonic() - started < 10


def test_bash_output_is_capped() -> None:
    outcome = run_operational_value(HEAD + "yes x\n", [], {}, BashLimits(timeout=30, max_output=64 * 1024))
    assert outcome.error is not None and "stdout exceeded the 64 KiB output limit" in outcome.error


def test_bash_stderr_flood_is_capped() -> None:
    outcome = run_operational_value(HEAD + "yes x >&2\n", [], {}, BashLimits(timeout=30, max_output=64 * 1024))
    assert outcome.error is not None and "stderr exceeded" in outcome.error


def test_bash_rejected_script_never_runs(tmp_path: Path) -> None:
    outcome = run_operational_value(HEAD + f"touch {tmp_path}/ran\n", [], {})
    assert outcome.error is not None and "rejected by the shell analysis" in outcome.error
    assert not (tmp_path / "ran").exists()


# --- credential stripping ------------------------------------------------------------------------


def test_bash_gets_no_inherited_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CANARY, "s3cr3t-canary")
    monkeypatch.setenv("HOME", "/root-canary")
    script = (
        HEAD
        + (
            "leak=$(env | grep -c -e s3cr3t-canary -e root-canary || true)\n"
            "names=$(env | awk -F= '$1 !~ /^(PATH|PWD|SHLVL|_|OLDPWD|MST_SESSION_FILE|GH_AW_SESSION_FILE|"
            "MST_GRADER_CONFIG|GH_AW_GRADER_CONFIG)$/' | wc -l)\n"
        )
        + _metrics(("leak", "$leak"), ("others", "$names"))
    )
    outcome = run_operational_value(script, [], {})
    assert outcome.error is None, outcome.error
    assert outcome.value == 0 and outcome.diagnostics == ({"id": "others", "value": 0.0},)


@needs_isolation
def test_node_gets_an_empty_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CANARY, "s3cr3t-canary")
    seen: list[dict[str, str]] = []
    real = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> Any:
        env = kwargs.get("env")
        seen.append({"inherited": "yes"} if env is None else dict(env))
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording)
    run_graders([], parse_graders_config({"probe": {"script": "return 1"}}))
    assert seen == [{}]


# --- session-file input ----------------------------------------------------------------------------


def test_session_file_is_arg_one_and_both_env_names() -> None:
    session = sample_session()
    script = HEAD + (
        '[[ "$1" == "$MST_SESSION_FILE" && "$1" == "$GH_AW_SESSION_FILE" ]] && same=1 || same=0\n'
        'lines=$(wc -l < "$1")\n'
        "first=$(head -n 1 \"$1\" | jq -r .type | grep -c session.format || true)\n"
        "k=$(jq -r .k <<< \"$GH_AW_GRADER_CONFIG\")\n"
        'stdin=$(cat | wc -c)\n'
        'here=$(pwd | grep -c mst-bash-grader- || true)\n'
    ) + _metrics(("same", "$same"), ("lines", "$lines"), ("first", "$first"), ("k", "$k"), ("stdin", "$stdin"),
                 ("tmpcwd", "$here"))  # fmt: skip
    outcome = run_operational_value(script, session, {"k": 4})
    assert outcome.error is None, outcome.error
    assert outcome.value == 1
    assert {d["id"]: d["value"] for d in outcome.diagnostics} == {
        "lines": len(session), "first": 1, "k": 4, "stdin": 0, "tmpcwd": 1,
    }  # fmt: skip


def test_session_file_holds_the_redacted_session_the_grader_was_given() -> None:
    session = [
        {"type": "user.message", "data": {"text": "[REDACTED]"}, "provenance": {"component": "t", "phase": "agent"}}
    ]
    script = HEAD + "n=$(grep -c 'REDACTED' \"$1\")\n" + _metrics(("n", "$n"))
    assert run_operational_value(script, session, {}).value == 1


# --- legacy metric output -------------------------------------------------------------------------


def test_legacy_metric_array_first_is_value_rest_are_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "v.sh").write_text(HEAD + _metrics(("quality", "0.8"), ("files", "3"), ("skipped", "null")))
    config = parse_graders_config({"operational-value": {"run": "v.sh", "threshold": 0.5}}, base_dir=tmp_path)
    [result] = [r for r in run_graders(sample_session(), config).results if r["id"] == "operational-value"]
    assert result["value"] == 0.8 and result["status"] == "pass" and result["thresholdOutcome"] == "met"
    assert result["diagnostics"] == [{"id": "files", "value": 3.0}, {"id": "skipped", "value": None}]
    assert "quality" in result["message"] and "files=3.0" in result["message"]


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        (b"", "not JSON"),
        (b"0.5", "non-empty JSON array"),
        (b"[]", "non-empty JSON array"),
        (b'[{"id":"a","value":1},{"id":"a","value":2}]', "repeats the id"),
        (b'[{"id":"a","value":"1"}]', "not a finite number"),
        (b'[{"id":"a","value":true}]', "not a finite number"),
        (b'[{"id":"a","value":1e999}]', "not"),
        (b'[{"value":1}]', "non-empty string 'id'"),
        (b'[{"id":"a"}]', "has no 'value'"),
        (b"[1]", "not an object"),
    ],
)
def test_invalid_metric_output_is_an_error(stdout: bytes, fragment: str) -> None:
    outcome = parse_metrics(stdout)
    assert outcome.error is not None and fragment in outcome.error and outcome.value is None


def test_failing_script_is_an_error_with_its_stderr() -> None:
    outcome = run_operational_value(HEAD + "echo 'no evidence' >&2\nexit 3\n", [], {})
    assert outcome.error is not None and "status 3" in outcome.error and "no evidence" in outcome.error


# --- CLI -------------------------------------------------------------------------------------------


def test_check_shell_cli(tmp_path: Path) -> None:
    from mst.cli import main

    good, bad = tmp_path / "good.sh", tmp_path / "bad.sh"
    good.write_text(HEAD + 'jq length "$1" >&2\n')
    bad.write_text(HEAD + "echo x > out\nrm -rf y\n")
    ok = CliRunner().invoke(main, ["graders", "check-shell", str(good)])
    assert ok.exit_code == 0 and "accepted" in ok.output
    rejected = CliRunner().invoke(main, ["graders", "check-shell", str(bad)])
    assert rejected.exit_code == 2
    assert "line 3: > out" in rejected.output and "line 4: rm -rf y: 'rm' writes files" in rejected.output


@needs_isolation
def test_replay_cli_runs_custom_graders_isolated(tmp_path: Path) -> None:
    from mst.cli import main

    session_file = tmp_path / "session.jsonl"
    session_file.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in sample_session()))
    (tmp_path / "v.sh").write_text(HEAD + 'n=$(wc -l < "$1")\n' + _metrics(("lines", "$n")))
    (tmp_path / "graders.yaml").write_text(
        "graders:\n  my-js:\n    script: 'return session.length * 2'\n  operational-value:\n    run: v.sh\n"
    )
    out = CliRunner().invoke(main, ["graders", "run", str(session_file), "--config", str(tmp_path / "graders.yaml"),
                                    "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    results = {r["id"]: r for r in orjson.loads(out.output)["results"]}
    assert results["my-js"]["value"] == 20.0 and results["operational-value"]["value"] == 10.0


def test_validation_rejects_a_writing_script_with_its_line(tmp_path: Path) -> None:
    from mst.graders import GradersConfigError

    (tmp_path / "v.sh").write_text(HEAD + "sed -i s/a/b/ f\n")
    with pytest.raises(GradersConfigError) as info:
        parse_graders_config({"operational-value": {"run": "v.sh"}}, base_dir=tmp_path)
    [(path, message)] = info.value.errors
    assert path == "graders.operational-value.run" and "line 3" in message and "sed -i" in message


def test_environment_of_this_process_is_untouched() -> None:
    before = dict(os.environ)
    run_operational_value(HEAD + _metrics(("v", "1")), [], {})
    assert dict(os.environ) == before
