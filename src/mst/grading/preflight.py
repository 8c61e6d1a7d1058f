"""The judge preflight: before any judge runs, check that each can (docs/grading.md, "Preflight").

Each kind of judge says what it needs as a :class:`JudgeNeeds` — the keys it reads, the programs
it runs, the Python modules it imports — through a function registered for its kind
(:func:`register_needs`). The preflight checks every judge of a grading against the machine it
runs on: each program is on ``PATH`` and answers ``--version``, each module imports, each key is
present. Locally it runs before anything is collected or graded; in shards the coordinator
checks the keys against the secrets file (the only keys a worker gets) before any shard starts,
and every grade worker runs the whole preflight before it grades, failing its shard otherwise.

A code judge needs its module to import (or its entry point to load) and the secrets it names;
a callable may declare more by carrying a ``needs`` attribute, e.g.
``judge.needs = JudgeNeeds(binaries=("git",), imports=("openai",), env=("OPENAI_API_KEY",))``.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mst.config.errors import Problem, UserError
from mst.config.resolved import ResolvedEval, ResolvedJudge
from mst.grading.context import eval_judges
from mst.grading.judges import JUDGE_KINDS, JudgeLoadError, kind_module, load_callable

VERSION_TIMEOUT: Final = 30.0


@dataclass(frozen=True, slots=True)
class JudgeNeeds:
    """What a judge needs where it runs: keys by name, programs on PATH, importable modules."""

    env: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Missing:
    """One thing a judge lacks, and how to get it."""

    judge: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"judge {self.judge!r}: {self.what}; {self.fix}"


NeedsOf = Callable[[ResolvedJudge, Path | None], JudgeNeeds]  # (judge, the eval's directory)
_KINDS: dict[str, NeedsOf] = {}


def register_needs(kind: str, needs: NeedsOf) -> None:
    """Say what judges of ``kind`` (their :attr:`ResolvedJudge.source`) need; one function a kind."""
    _KINDS[kind] = needs


def code_needs(judge: ResolvedJudge, base_dir: Path | None) -> JudgeNeeds:
    """A code judge: its module loads (raises :class:`JudgeLoadError`), its secrets, what it declares."""
    declared = getattr(load_callable(judge, base_dir), "needs", None)
    extra = declared if isinstance(declared, JudgeNeeds) else JudgeNeeds()
    return JudgeNeeds(tuple(dict.fromkeys([*judge.secrets, *extra.env])), extra.binaries, extra.imports)


def kind_needs(judge: ResolvedJudge, base_dir: Path | None) -> JudgeNeeds:
    """A judge of a kind in ``JUDGE_KINDS`` (``llm``, ``agentic``): what its module's ``needs`` says."""
    env, binaries, imports = kind_module(judge.source).needs(judge)  # type: ignore[union-attr]
    return JudgeNeeds(tuple(env), tuple(binaries), tuple(imports))


register_needs("code", code_needs)
register_needs("plugin", code_needs)
for _kind in JUDGE_KINDS:
    register_needs(_kind, kind_needs)


def judges_of(resolved: ResolvedEval) -> list[ResolvedJudge]:
    """Every distinct judge of the eval (by identity), the pairwise judge last (a new list): read
    from its cases once per resolved eval, with the grading context's judge sets
    (:func:`mst.grading.context.eval_judges`)."""
    return list(eval_judges(resolved))


@dataclass(frozen=True, slots=True)
class Keys:
    """Where a grading's keys come from, to tell whether a judge's key is there and where to add it."""

    present: Callable[[str], bool]
    where: str  # "the secrets file", "the environment or the secrets file"


def check(judges: Iterable[ResolvedJudge], keys: Keys, base_dir: Path | None, *,
          keys_only: bool = False) -> list[Missing]:
    """Everything the judges lack here; ``keys_only`` checks the keys alone (the coordinator of
    shards: programs and modules are the workers' to have)."""
    missing: list[Missing] = []
    versions: dict[str, Missing | None] = {}
    for judge in judges:
        needs_of = _KINDS.get(judge.source)
        if needs_of is None:
            missing.append(Missing(judge.id, f"no preflight is known for judges of kind {judge.source!r}",
                                   "this mst cannot run such a judge"))
            continue
        try:
            needs = needs_of(judge, base_dir)
        except JudgeLoadError as exc:
            missing.append(Missing(judge.id, f"its code does not load: {exc.why}",
                                   "install its package (or ship its module beside the eval) where it grades"))
            continue
        missing += [Missing(judge.id, f"the key {name} is not in {keys.where}",
                            f"add {name}=... to {keys.where}") for name in needs.env if not keys.present(name)]
        if keys_only:
            continue
        for binary in needs.binaries:
            if binary not in versions:
                versions[binary] = _binary(judge.id, binary)
            problem = versions[binary]
            if problem is not None:
                missing.append(Missing(judge.id, problem.what, problem.fix))
        missing += [m for m in (_module(judge.id, name) for name in needs.imports) if m is not None]
    return missing


def needed_env(resolved: ResolvedEval, judges: Iterable[ResolvedJudge] | None = None) -> list[str]:
    """Every key any judge of the eval needs: what a grade worker must be given. ``judges`` are
    the eval's :func:`judges_of` when the caller has them (each reading of its cases makes every
    case afresh)."""
    names: dict[str, None] = {}
    for judge in judges_of(resolved) if judges is None else judges:
        needs_of = _KINDS.get(judge.source)
        try:
            needs = needs_of(judge, resolved.base_dir) if needs_of is not None else JudgeNeeds()
        except JudgeLoadError:
            continue  # reported by the preflight itself
        names.update(dict.fromkeys(needs.env))
    return list(names)


def _binary(judge: str, name: str) -> Missing | None:
    path = shutil.which(name)
    if path is None:
        return Missing(judge, f"the program {name!r} is not on PATH",
                       "install it on this machine (for shards: in the worker image)")
    try:
        done = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Missing(judge, f"'{name} --version' failed: {type(exc).__name__}", f"check the install of {name}")
    if done.returncode != 0 or not (done.stdout or done.stderr).strip():
        return Missing(judge, f"'{name} --version' exited with status {done.returncode} and no version",
                       f"check the install of {name}")
    return None


def _module(judge: str, name: str) -> Missing | None:
    try:
        importlib.import_module(name)
    except Exception as exc:
        return Missing(judge, f"the Python module {name!r} does not import ({type(exc).__name__}: {exc})",
                       f"install the package that provides {name!r} where it grades")
    return None


def require(missing: list[Missing], file: str) -> None:
    """Stop with a user error (exit 2) naming every judge and what it lacks."""
    if missing:
        raise UserError([Problem(file, f"judge preflight: {m}") for m in missing])


__all__ = ["JudgeNeeds", "Keys", "Missing", "check", "code_needs", "judges_of", "kind_needs", "needed_env",
           "register_needs", "require"]
