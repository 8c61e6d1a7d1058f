"""``graders:`` configuration (docs/graders.md, "Configuration") and its edge cases."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mst.graders import (
    DEFAULT_IDS,
    OPT_IN_IDS,
    GradersConfigError,
    build_manifest,
    config_from_manifest,
    parse_graders_config,
    run_graders,
)


def errors(raw: Any, **kw: Any) -> list[tuple[str, str]]:
    with pytest.raises(GradersConfigError) as info:
        parse_graders_config(raw, **kw)
    return info.value.errors


def paths(raw: Any, **kw: Any) -> list[str]:
    return [p for p, _ in errors(raw, **kw)]


# --- default activation, opt-ins, disabling ------------------------------------------------------


@pytest.mark.parametrize("raw", [None, {}])
def test_default_activation(raw: Any) -> None:
    config = parse_graders_config(raw)
    assert [s.id for s in config.enabled] == list(DEFAULT_IDS)
    assert len(DEFAULT_IDS) == 10


def test_explicit_opt_in_adds_to_defaults() -> None:
    config = parse_graders_config({"recurrence-determinism": {}, "tool-success-rate": {"threshold": 0.95}})
    assert [s.id for s in config.enabled] == [*DEFAULT_IDS, "recurrence-determinism"]
    spec = config.get("tool-success-rate")
    assert spec is not None and spec.threshold == 0.95


def test_null_entry_means_defaults_for_that_grader() -> None:
    assert "recurrence-rate" in parse_graders_config({"recurrence-rate": None}).enabled_ids


def test_disabling_one_default() -> None:
    config = parse_graders_config({"loops": {"enabled": False}})
    assert "loops" not in config.enabled_ids
    spec = config.get("loops")
    assert spec is not None and not spec.enabled


def test_disabling_all_defaults_is_valid() -> None:
    config = parse_graders_config({gid: {"enabled": False} for gid in DEFAULT_IDS})
    assert config.enabled == ()
    run = run_graders([], config)
    assert run.results == []
    assert len(run.manifest["graders"]) == 10


def test_disabled_default_persists_through_manifest_and_replay() -> None:
    config = parse_graders_config({"loops": {"enabled": False}, "tool-success-rate": {"threshold": 0.5}})
    manifest = build_manifest(config)
    entry = next(g for g in manifest["graders"] if g["id"] == "loops")
    assert entry["enabled"] is False
    again = config_from_manifest(manifest)
    assert "loops" not in again.enabled_ids
    assert build_manifest(again) == manifest
    assert "loops" not in {r["id"] for r in run_graders([], again).results}


def test_manifest_cannot_smuggle_a_builtin_override() -> None:
    manifest = build_manifest(parse_graders_config(None))
    manifest["graders"][0]["unit"] = "percent"
    with pytest.raises(GradersConfigError):
        config_from_manifest(manifest)


# --- rejection of overrides and unsupported fields ----------------------------------------------


def test_builtin_rejects_script() -> None:
    [(path, msg)] = errors({"loops": {"script": "return 1"}})
    assert path == "graders.loops.script" and "built-in" in msg


def test_builtin_rejects_run() -> None:
    assert paths({"retries": {"run": "x.sh"}}) == ["graders.retries.run"]


@pytest.mark.parametrize(("field", "value"), [("unit", "percent"), ("direction", "lower"), ("min", 0.5)])
def test_builtin_identity_cannot_be_overridden(field: str, value: Any) -> None:
    assert paths({"tool-success-rate": {field: value}}) == [f"graders.tool-success-rate.{field}"]


def test_builtin_identity_may_be_restated() -> None:
    parse_graders_config({"tool-success-rate": {"unit": "ratio", "direction": "higher_is_better"}})


def test_unsupported_field_fails_even_when_disabled() -> None:
    [(path, msg)] = errors({"loops": {"enabled": False, "timeout": 3}})
    assert path == "graders.loops.timeout" and "unsupported field" in msg


def test_builtin_config_keys_are_checked() -> None:
    assert paths({"recurrence-determinism": {"config": {"minLine": 1, "typo": True}}}) == [
        "graders.recurrence-determinism.config.minLine",
        "graders.recurrence-determinism.config.typo",
    ]
    assert paths({"loops": {"config": {"anything": 1}}}) == ["graders.loops.config.anything"]


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"tool-success-rate": {"threshold": "high"}}, "graders.tool-success-rate.threshold"),
        ({"tool-success-rate": {"threshold": True}}, "graders.tool-success-rate.threshold"),
        ({"tool-success-rate": {"threshold": float("nan")}}, "graders.tool-success-rate.threshold"),
        ({"loops": {"enabled": "no"}}, "graders.loops.enabled"),
        ({"loops": {"name": 3}}, "graders.loops.name"),
        ({"loops": {"config": []}}, "graders.loops.config"),
        ({"loops": 5}, "graders.loops"),
        ({"Bad_Id": {}}, "graders.Bad_Id"),
        ({"a" * 65: {}}, "graders." + "a" * 65),
        ({"my-metric": {"script": "x", "direction": "up"}}, "graders.my-metric.direction"),
        ({"my-metric": {"script": "x", "min": 2, "max": 1}}, "graders.my-metric.min"),
        ({"my-metric": {"script": "x", "config": {"k": {1, 2}}}}, "graders.my-metric.config.k"),
    ],
)
def test_errors_name_the_field_path(raw: Any, path: str) -> None:
    assert path in paths(raw)


def test_all_errors_are_reported_at_once() -> None:
    assert paths({"loops": {"threshold": "x", "foo": 1}, "retries": {"script": "y"}}) == [
        "graders.loops.foo",
        "graders.loops.threshold",
        "graders.retries.script",
    ]


def test_graders_must_be_a_mapping() -> None:
    assert paths(["loops"]) == ["graders"]


def test_error_message_lists_paths() -> None:
    with pytest.raises(GradersConfigError, match=r"graders\.loops\.threshold: must be a finite number"):
        parse_graders_config({"loops": {"threshold": "x"}})


# --- custom graders -----------------------------------------------------------------------------


def test_custom_grader_needs_inline_script() -> None:
    assert paths({"my-metric": {"unit": "count"}}) == ["graders.my-metric.script"]


def test_custom_script_size_limit() -> None:
    parse_graders_config({"my-metric": {"script": "x" * (256 * 1024)}})
    [(path, msg)] = errors({"my-metric": {"script": "x" * (256 * 1024 + 1)}})
    assert path == "graders.my-metric.script" and "256 KiB" in msg


def test_custom_grader_rejects_run() -> None:
    assert paths({"my-metric": {"script": "x", "run": "a.sh"}}) == ["graders.my-metric.run"]


def test_custom_grader_is_registered_with_a_source_digest_and_no_source_in_manifest() -> None:
    config = parse_graders_config({"my-metric": {"script": "return 1", "unit": "count", "direction": "lower"}})
    spec = config.get("my-metric")
    assert spec is not None and spec.kind == "custom" and spec.direction == "lower"
    manifest = build_manifest(config)
    entry = next(g for g in manifest["graders"] if g["id"] == "my-metric")
    assert entry["implementation"]["sourceDigest"].startswith("sha256:")
    assert "return 1" not in repr(manifest)


def test_custom_graders_run_in_the_isolated_runtime() -> None:
    # The runtime itself is proven in tests/graders_custom; here only that run_graders uses it.
    config = parse_graders_config({"my-metric": {"script": "return 1"}})
    [r] = [r for r in run_graders([], config).results if r["id"] == "my-metric"]
    assert r["status"] == "pass" and r["value"] == 1.0
    assert r["implementation"]["sourceDigest"].startswith("sha256:")


# --- operational-value --------------------------------------------------------------------------


def test_operational_value_requires_run() -> None:
    assert paths({"operational-value": {}}) == ["graders.operational-value.run"]


def test_operational_value_rejects_script() -> None:
    [(path, msg)] = errors({"operational-value": {"run": "ok.sh", "script": "x"}})
    assert path == "graders.operational-value.script" and "use 'run'" in msg


@pytest.mark.parametrize("run", ["/abs/x.sh", "../x.sh", "a/../../x.sh", "x.py", "x", "a\\b.sh", ""])
def test_invalid_shell_paths_are_rejected(run: str) -> None:
    assert paths({"operational-value": {"run": run}}) == ["graders.operational-value.run"]


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_operational_value_file_checks_pass_and_record_digest(tmp_path: Path) -> None:
    _script(tmp_path / "graders" / "value.sh", '#!/usr/bin/env bash\necho \'[{"id":"v","value":1}]\'\n')
    config = parse_graders_config({"operational-value": {"run": "graders/value.sh"}}, base_dir=tmp_path)
    spec = config.get("operational-value")
    assert spec is not None and spec.source_digest is not None and spec.source_digest.startswith("sha256:")
    assert build_manifest(config)["graders"][-1]["run"] == "graders/value.sh"


def test_dot_slash_paths_are_relative_to_the_declaring_file(tmp_path: Path) -> None:
    _script(tmp_path / "evals" / "v.sh", "#!/bin/bash\n")
    parse_graders_config({"operational-value": {"run": "./v.sh"}}, base_dir=tmp_path / "evals", repo_root=tmp_path)
    with pytest.raises(GradersConfigError, match="file not found"):
        parse_graders_config({"operational-value": {"run": "v.sh"}}, base_dir=tmp_path / "evals", repo_root=tmp_path)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("#!/bin/sh\necho 1\n", "Bash shebang"),
        ("echo 1\n", "Bash shebang"),
        ("#!/bin/bash\n" + "#" * (64 * 1024), "64 KiB"),
        (b"#!/bin/bash\n\xff\xfe", "UTF-8"),
    ],
)
def test_operational_value_file_content_checks(tmp_path: Path, content: str | bytes, fragment: str) -> None:
    target = tmp_path / "v.sh"
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    [(path, msg)] = errors({"operational-value": {"run": "v.sh"}}, base_dir=tmp_path)
    assert path == "graders.operational-value.run" and fragment in msg


def test_operational_value_symlink_escape_is_rejected(tmp_path: Path) -> None:
    outside = _script(tmp_path / "outside" / "v.sh", "#!/bin/bash\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(outside, repo / "v.sh")
    [(_, msg)] = errors({"operational-value": {"run": "v.sh"}}, base_dir=repo)
    assert "outside the repository" in msg


def test_operational_value_file_writes_fail_validation_and_never_run(tmp_path: Path) -> None:
    _script(tmp_path / "v.sh", "#!/bin/bash\ntouch SHOULD_NOT_EXIST\n")
    [(path, msg)] = errors({"operational-value": {"run": "v.sh"}}, base_dir=tmp_path)
    assert path == "graders.operational-value.run" and "line 2" in msg and "'touch' writes files" in msg
    assert not (tmp_path / "SHOULD_NOT_EXIST").exists()


def test_opt_in_ids_are_known() -> None:
    assert set(OPT_IN_IDS) >= {
        "recurrence-rate",
        "recurrence-determinism",
        "event-entropy-rate",
        "lempel-ziv-trajectory-complexity",
        "state-revisit-probability",
        "tool-wise-score",
        "trajectory-ndtw",
        "objective-coverage",
    }
