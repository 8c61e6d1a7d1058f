"""The Bash corpus: snippets that write files or execute dynamically are all rejected (naming the
line and construct); real read-only scripts are all accepted, and run with the right values."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from customkit import sample_session

from mst.graders.custom.bash_check import analyze_shell
from mst.graders.custom.bash_run import run_operational_value

REJECTED = [
    "echo hi > out.txt",
    "echo hi >> log.txt",
    "printf x &> out",
    "echo x >| forced",
    "cat <<EOF > notes\nhi\nEOF",
    "exec 3> fd.txt",
    'echo x > "$HOME/x"',
    "echo x >2",
    "echo x >& file.txt",
    "tee copy.txt < /dev/null",
    "cp a b",
    "mv a b",
    "rm -f a",
    "/bin/rm -rf build",
    "\\rm x",
    "touch stamp",
    "mkdir -p d",
    "rmdir d",
    "dd if=/dev/zero of=disk bs=1 count=1",
    "sed -i 's/a/b/' file",
    "sed -ni 's/a/b/p' file",
    "sed 's/a/b/w written' file",
    "sed -n '/x/w out' file",
    "find . -delete",
    "find . -name '*.tmp' -exec rm {} \\;",
    "find . -fprint list.txt",
    "truncate -s 0 f",
    "ln -s a b",
    "install -m 644 a b",
    "chmod +x f",
    "chown root f",
    "curl -o page.html http://example.invalid",
    "curl -sSLO http://example.invalid/x",
    "wget http://example.invalid",
    "tar xzf a.tgz",
    "tar -cf a.tar .",
    "gzip data.json",
    "sort -o sorted.txt in.txt",
    "uniq in.txt out.txt",
    "awk '{ print $1 > \"out\" }' f",
    "awk 'BEGIN { system(\"touch x\") }'",
    "awk '{ print | \"sh\" }' f",
    'eval "$cmd"',
    "eval echo hi",
    'bash -c "$payload"',
    "sh -c 'rm -rf /tmp/x'",
    "bash -c 'echo ok > /tmp/out'",
    "bash other.sh",
    "echo 'rm x' | bash",
    'source "$lib"',
    '. "$(dirname "$0")/lib.sh"',
    "$cmd --flag",
    "${tool} run",
    '"$runner" x',
    "$(echo rm) x",
    'exec "$next"',
    "exec rm x",
    "xargs rm < list",
    "xargs -n1 -I{} mv {} dest/",
    'xargs "$c"',
    "env -i PATH=/bin rm x",
    "env -S 'rm x'",
    "timeout 5 cp a b",
    "nice -n 5 touch x",
    "command rm x",
    "trap 'rm -f lock' EXIT",
    'trap "$handler" EXIT',
    'python3 -c \'open("x","w")\'',
    "perl -i -pe 's/a/b/' f",
    'node -e \'require("fs").writeFileSync("x","")\'',
    'declare "$name=1"',
    'unset "$name"',
    'echo "${template@P}"',
    "mapfile -C 'rm x' -c 1 arr < f",
    'printf -v "$name" %s x',
    "git commit -am x",
    'sed "s/$a/$b/" f',
    'awk "{print \\$$n}" f',
    "yq -i '.a = 1' f.yaml",
    "echo 'unterminated",
    "if then fi",
    "jq . f | sort | uniq\nrm -rf state > /dev/null",
    "alias ll='rm -rf'",
]

ACCEPTED_READ_ONLY = [
    "echo hi",
    "echo hi >&2",
    "echo hi 2>&1 >/dev/null",
    'jq -r .type "$1" | sort | uniq -c >&2',
    'cat < "$1" > /dev/null',
    'grep -c tool "$MST_SESSION_FILE" || true',
    "awk -v n=1 '$1 > n { print $2 }' f",
    "sed -n 's/a/b/p' f",
    "find . -name '*.json' -exec grep -l x {} +",
    "xargs -n1 echo < f",
    "bash -c 'echo nested ok'",
    "timeout 5 jq . f",
    "trap 'echo done >&2' EXIT",
    "gzip -dc f.gz | head",
    "tar -tzf a.tgz",
    "git log --oneline",
    "command -v jq >/dev/null",
    'x=$(jq length "$1"); echo "$x"',
    "jq . f | sort | uniq\necho ok >&2",
]


@pytest.mark.parametrize("snippet", REJECTED)
def test_writes_and_dynamic_execution_are_rejected(snippet: str) -> None:
    analysis = analyze_shell("#!/bin/bash\n" + snippet + "\n")
    assert not analysis.accepted, snippet
    assert all(r.line >= 2 and r.construct and r.reason for r in analysis.rejections)


def test_rejected_corpus_is_large_enough() -> None:
    assert len(REJECTED) >= 40


@pytest.mark.parametrize("snippet", ACCEPTED_READ_ONLY)
def test_read_only_constructs_are_accepted(snippet: str) -> None:
    analysis = analyze_shell("#!/bin/bash\n" + snippet + "\n")
    assert analysis.accepted, analysis.summary()


def test_rejections_name_line_and_construct() -> None:
    analysis = analyze_shell("#!/bin/bash\necho ok\nrm -rf build\necho x > out.txt\n")
    assert [(r.line, r.construct) for r in analysis.rejections] == [(3, "rm -rf build"), (4, "> out.txt")]
    assert "'rm' writes files" in str(analysis.rejections[0])


def test_literal_bash_c_body_lines_are_reported_in_the_outer_script() -> None:
    [rejection] = analyze_shell("#!/bin/bash\n\nbash -c 'echo a\ntouch b'\n").rejections
    assert rejection.line == 4 and rejection.construct == "touch b"


# --- real read-only scripts, run -------------------------------------------------------------------

HEAD = "#!/usr/bin/env bash\nset -euo pipefail\n"


def _metric(expr: str) -> str:
    return f'echo "[{{\\"id\\":\\"score\\",\\"value\\":{expr}}}]"\n'


SCRIPTS: list[tuple[str, str, float]] = [
    ("jq-count", 'n=$(jq -s length "$1")\n' + _metric("$n"), 10),
    ("jq-select", 'n=$(jq -c \'select(.type == "tool.execution_start")\' "$1" | wc -l)\n' + _metric("$n"), 3),
    (
        "jq-slurp-ratio",
        'jq -c -s \'[{id: "ok", value: (([.[] | select(.type == "tool.execution_complete" and .data.success)]'
        ' | length) / 3)}]\' "$1"\n',
        2 / 3,
    ),
    ("grep", 'n=$(grep -c \'"tool.execution_complete"\' "$MST_SESSION_FILE")\n' + _metric("$n"), 3),
    ("awk", "n=$(awk 'END { print NR }' \"$GH_AW_SESSION_FILE\")\n" + _metric("$n"), 10),
    (
        "pipeline-sort-uniq",
        'n=$(jq -r \'select(.type == "tool.execution_start") | .data.toolName\' "$1" | sort | uniq | wc -l)\n'
        + _metric("$n"),
        2,
    ),
    (
        "array",
        "mapfile -t names < <(jq -r 'select(.data.toolName) | .data.toolName' \"$1\")\n" + _metric("${#names[@]}"),
        3,
    ),
    (
        "double-brackets",
        'n=$(wc -l < "$1")\nif [[ $n -ge 10 && -s "$1" ]]; then v=1; else v=0; fi\n' + _metric("$v"),
        1,
    ),
    ("heredoc-into-command", "n=$(jq -r '.k' <<EOF\n{\"k\": 7}\nEOF\n)\n" + _metric("$n"), 7),
    ("function", 'count() { grep -c "$1" "$2" || true; }\nn=$(count model.request "$1")\n' + _metric("$n"), 2),
    (
        "case",
        'kind=$(jq -r \'select(.type == "session.result") | .type\' "$1")\n'
        'case "$kind" in\n  session.result) v=5 ;;\n  *) v=0 ;;\nesac\n' + _metric("$v"),
        5,
    ),
    ("config", 't=$(jq -r .target <<< "$MST_GRADER_CONFIG")\n' + _metric("$t"), 0.75),
    ("while-read", 'n=0\nwhile IFS= read -r line; do n=$((n + 1)); done < "$1"\n' + _metric("$n"), 10),
    ("arithmetic", "a=$(jq -s '[.[] | .data.usage.inputTokens // 0] | add' \"$1\")\n" + _metric("$((a / 10))"), 25),
    ("stderr-and-null", 'echo "debug" >&2\ngrep -q nothing-here "$1" 2>/dev/null || true\n' + _metric("1"), 1),
    ("empty-stdin", "n=$(cat | wc -c)\n" + _metric("$n"), 0),
    ("null-value", 'echo \'[{"id":"score","value":null}]\'\n', float("nan")),
    (
        "diagnostics",
        'echo \'[{"id":"score","value":0.5},{"id":"calls","value":3},{"id":"fails","value":null}]\'\n',
        0.5,
    ),
]


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is installed by .ci/run")
@pytest.mark.parametrize(("name", "body", "expected"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_read_only_scripts_are_accepted_and_run(name: str, body: str, expected: float) -> None:
    source = HEAD + body
    assert analyze_shell(source).accepted, analyze_shell(source).summary()
    outcome = run_operational_value(source, sample_session(), {"target": 0.75})
    assert outcome.error is None, outcome.error
    if expected != expected:  # NaN marks an expected null
        assert outcome.value is None
    else:
        assert outcome.value == pytest.approx(expected)


def test_real_script_corpus_is_large_enough() -> None:
    assert len(SCRIPTS) >= 15


def test_frozen_bytes_run_not_the_file_on_disk(tmp_path: Path) -> None:
    from mst.graders import parse_graders_config, run_graders

    script = tmp_path / "value.sh"
    script.write_text(HEAD + _metric("1"))
    config = parse_graders_config({"operational-value": {"run": "value.sh"}}, base_dir=tmp_path)
    script.write_text(HEAD + _metric("2"))
    [result] = [r for r in run_graders(sample_session(), config).results if r["id"] == "operational-value"]
    assert result["value"] == 1.0 and result["implementation"]["sourceDigest"].startswith("sha256:")
