"""Who may import whom (docs/README.md, "Packages and their dependencies"), held for every package.

Every ``import`` of an mst module anywhere in ``src/mst`` counts — at the top of a module, inside
a function, or under ``TYPE_CHECKING`` — because a lazy import is still a dependency. Dependencies
point one way, from the edges (the CLI, the API) to the core (session, endings, the leaf modules).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC / "mst"

# Leaf modules: import nothing from mst but other leaves, so any layer may use them.
LEAVES = frozenset({"fileio", "errors", "_lazy", "_gc", "_columns", "statistics"})
# The parts of the engine that config (read by everything above the core) must not import.
ENGINE = frozenset({"collect", "clients", "providers", "grading", "graders", "runners", "runs", "store", "report",
                    "api", "session", "endings"})  # fmt: skip

# Resolution (mst.config.resolve, on the coordinator only) is where each plugin kind checks its own
# configuration: judges are resolved to their identities, graders' settings parsed, a case's mock
# script checked against the mock model. The layout puts resolution in config; these validators are
# the only engine modules config may reach, and only from inside a function (never at import time).
RESOLVE_VALIDATORS = frozenset({"mst.grading.judges", "mst.graders", "mst.providers.mock"})

# Modules another change owns; their rule breaks are listed here, one per line with the reason,
# and removed when fixed there. (Empty: no module breaks a rule today.)
KNOWN_BREAKS: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Edge:
    source: str  # importing module, e.g. mst.session.io
    target: str  # imported module, e.g. mst.fileio
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def component(module: str) -> str:
    """The package a module belongs to: ``mst.session.lookups.build`` → ``session``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "mst"
    name = parts[1]
    return {"grading_phase": "grading", "pipeline": "api", "__main__": "cli"}.get(name, name)


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    return inside


def edges_of(module: str, source: str) -> Iterator[Edge]:
    tree = ast.parse(source)
    in_function = _function_nodes(tree)
    package = module if MODULES.get(module, Path()).name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mst":
                    yield Edge(module, alias.name, node.lineno, id(node) in in_function)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] != "mst":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Edge(module, sub if sub in MODULES else base, node.lineno, id(node) in in_function)


def all_edges() -> list[Edge]:
    return [e for m, p in sorted(MODULES.items()) for e in edges_of(m, p.read_text(encoding="utf-8"))]


def rule_breaks(edge: Edge) -> list[str]:
    """Every rule ``edge`` breaks, as sentences naming the rule."""
    src, dst = component(edge.source), component(edge.target)
    if src == dst or (edge.target == "mst" and src != "mst"):  # within a package; `from mst import __version__`
        return []
    out: list[str] = []
    if dst == "cli" and src != "cli":
        out.append("nothing imports cli")
    if src in LEAVES and dst not in LEAVES:
        out.append(f"the leaf module {src} imports nothing from mst but other leaves")
    if src == "endings" and dst not in LEAVES:
        out.append("endings imports no other mst module")
    if src == "session" and dst not in LEAVES | {"endings"}:
        out.append("session imports no other mst module (but the leaves and endings' types)")
    if src == "graders" and dst not in LEAVES | {"session"}:
        out.append("graders import only session (and the leaves)")
    if src in ("clients", "providers") and dst in ("grading", "graders", "runs", "runners", "store", "report", "api",
                                                    "collect"):  # fmt: skip
        out.append(f"{src} know nothing of grading, runs, runners, stores or reports")
    if src == "grading" and dst in ("collect", "clients", "runners", "api"):
        out.append("grading knows nothing of collecting, clients or runners")
    if src == "config" and dst in ENGINE and not _resolution_check(edge):
        out.append("config imports no engine module")
    return out


def _resolution_check(edge: Edge) -> bool:
    return (edge.source == "mst.config.resolve" and edge.in_function
            and any(edge.target == v or edge.target.startswith(v + ".") for v in RESOLVE_VALIDATORS))  # fmt: skip


def test_every_package_keeps_the_import_rules() -> None:
    broken = [f"{e.source} (line {e.line}) imports {e.target}: {why}"
              for e in all_edges() for why in rule_breaks(e) if (e.source, e.target) not in KNOWN_BREAKS]  # fmt: skip
    assert not broken, "\n".join(broken)


def test_known_breaks_are_still_real() -> None:
    """An allow-list entry that no longer breaks a rule must go, so the list never hides a new break."""
    real = {(e.source, e.target) for e in all_edges() if rule_breaks(e)}
    assert real >= KNOWN_BREAKS, sorted(KNOWN_BREAKS - real)


@pytest.mark.parametrize(("source_module", "code", "rule"), [
    ("mst.session.io", "from mst.runs.files import Journal", "session imports no other mst module"),
    ("mst.session.io", "def f():\n    from mst.runs import layout", "session imports no other mst module"),
    ("mst.endings", "import mst.session.events", "endings imports no other mst module"),
    ("mst.graders.builtins", "from mst.grading.judges import Verdict", "graders import only session"),
    ("mst.clients.agent", "from mst.runs.layout import RunPaths", "clients know nothing of grading"),
    ("mst.providers.mock", "from mst.grading import grade_trial", "providers know nothing of grading"),
    ("mst.grading.grade", "from mst.collect import collect", "grading knows nothing of collecting"),
    ("mst.grading.judges", "from mst.clients.registry import client_class", "grading knows nothing of collecting"),
    ("mst.runners.worker", "from mst.cli.main import main", "nothing imports cli"),
    ("mst.config.load", "from mst.runs.layout import RunPaths", "config imports no engine module"),
    ("mst.config.resolve", "from mst.grading.judges import resolve_judge", "config imports no engine module"),
    ("mst.fileio", "from mst.config.load import load_eval", "the leaf module fileio"),
    ("mst.statistics.rates", "from mst.runs.run import Run", "the leaf module statistics"),
    ("mst._gc", "from mst.session.lookups import create_session_lookups", "the leaf module _gc"),
])  # fmt: skip
def test_the_checker_sees_each_kind_of_break(source_module: str, code: str, rule: str) -> None:
    """The rules themselves can fail: each forbidden import, written into a module, is reported."""
    breaks = [why for e in edges_of(source_module, code) for why in rule_breaks(e)]
    assert any(why.startswith(rule) for why in breaks), breaks


def test_allowed_imports_pass() -> None:
    allowed = [
        ("mst.session.io", "from mst.fileio import read_bytes"),
        ("mst.graders.builtins", "from mst.session.lookups import SessionLookups"),
        ("mst.graders.experiments", "from mst.statistics import paired_difference"),
        ("mst.config.yamlfile", "from mst._gc import paused_gc"),
        ("mst.config.resolve", "def f():\n    from mst.grading.judges import resolve_judge"),
        ("mst.runners.worker", "from mst import __version__"),
        ("mst.cli.main", "from mst.runners.worker import main"),
    ]
    for module, code in allowed:
        assert [why for e in edges_of(module, code) for why in rule_breaks(e)] == [], (module, code)
