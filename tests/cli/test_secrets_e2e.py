"""A `--secrets-file` value reaches the client's environment and no file of the run, nor the output."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import basic_eval, only_run, run_cli, write_eval

CANARY = "sk-canary-7f3a9c1e5b"


def test_secret_never_reaches_run_files_or_output(tmp_path: Path) -> None:
    (tmp_path / "secrets.env").write_text(f"# keys\nMY_KEY={CANARY}\n")
    variant = {"id": "cmd", "client": "command", "secrets": ["MY_KEY"],
               "settings": {"command": ["sh", "-c", 'echo "42 key=$MY_KEY"; echo "err $MY_KEY" >&2; '
                                                    'echo "k=$MY_KEY" > notes.txt']}}
    doc = basic_eval(variants=[variant], assertions=[{"type": "contains", "value": "42"}],
                     cases=[{"id": "c1", "prompt": "say 42", "expected": "42"}])
    path = write_eval(tmp_path, doc)
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--secrets-file", "secrets.env", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert CANARY not in proc.stdout + proc.stderr
    run = only_run(tmp_path / "runs")
    answers = []
    for file in run.rglob("*"):
        if file.is_file():
            text = file.read_bytes()
            assert CANARY.encode() not in text, file
            if b"key=[REDACTED]" in text:
                answers.append(file.name)
    assert "run.json" in answers  # the client did read the key: it was redacted, not absent
    assert (next(run.rglob("notes.txt"))).read_text() == "k=[REDACTED]\n"  # artifacts too
    proc = run_cli("grade", str(run), "--secrets-file", "secrets.env", cwd=tmp_path)
    assert CANARY not in proc.stdout + proc.stderr
    for file in (tmp_path / "runs").rglob("*"):
        if file.is_file():
            assert CANARY.encode() not in file.read_bytes(), file
