"""One set of exit codes and one UserError, and README's table says what each code means."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from mst.cli.graders import graders
from mst.errors import EXIT_CODES, EXIT_USER, UserError

ROOT = Path(__file__).resolve().parents[2]


def test_readme_table_lists_every_exit_code_with_its_meaning() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Exit codes"):]
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", section[: section.index("\n## ")], flags=re.M))
    assert {int(code) for code in rows} == set(EXIT_CODES)
    for code, meaning in EXIT_CODES.items():
        assert rows[str(code)].startswith(meaning), (code, rows[str(code)])


def test_exit_codes_and_user_error_are_defined_once() -> None:
    sources = {p: p.read_text() for p in (ROOT / "src" / "mst").rglob("*.py")}

    def defining(pattern: str) -> list[str]:
        return sorted(str(p.relative_to(ROOT)) for p, s in sources.items() if re.search(pattern, s, re.M))

    assert defining(r"^EXIT_\w+(: \w+)? = ") == ["src/mst/errors.py"]
    assert defining(r"^class UserError\b") == ["src/mst/errors.py"]


def test_graders_commands_end_a_user_error_like_every_command(tmp_path: Path) -> None:
    res = CliRunner().invoke(graders, ["run", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == EXIT_USER
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    assert isinstance(UserError("x"), Exception)
