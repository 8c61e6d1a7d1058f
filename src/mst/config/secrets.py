"""`--secrets-file`: a dotenv file of keys for clients and judges, and who gets which.

Values are only ever held in memory and in the environment of the processes that need them;
error messages name the file and line, never a value.

Each consumer gets only the secrets it names (docs/shards.md, "Secrets"): a variant's client gets the
names in the variant's ``secrets`` list plus every ``${NAME}`` its ``mcpServers`` refer to; the
judges (the grading environment, on the coordinator and on every grade worker) get the names in
their ``secrets`` lists. A named secret the file lacks stops the run before anything starts.
Every value of the file is still redacted everywhere, whoever received it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mst.config.errors import Problem, UserError

if TYPE_CHECKING:
    from mst.config.models import VariantConfig
    from mst.config.resolved import ResolvedEval

_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
SECRET_REF: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # a reference in a server's env or headers


def load_secrets(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Problem(str(path), "secrets file not found")) from None
    except UnicodeDecodeError:
        raise UserError(Problem(str(path), "secrets file is not UTF-8 text")) from None
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if match is None:
            raise UserError(Problem(str(path), "expected NAME=value (the value is not shown)", line=lineno))
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[name] = value
    return out


@contextmanager
def in_environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment, and the earlier values back after: judges
    read their keys from the environment, as they would in a grade worker."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def variant_secret_names(variant: VariantConfig) -> list[str]:
    """The secrets a variant's client gets: its ``secrets`` list and its servers' references."""
    names = dict.fromkeys(variant.secrets)
    for server in variant.mcpServers.values():
        values = [*getattr(server, "env", {}).values(), *getattr(server, "headers", {}).values()]
        for value in values:
            names.update(dict.fromkeys(SECRET_REF.findall(value)))
    return list(names)


def judge_secret_names(resolved: ResolvedEval) -> list[str]:
    """The secrets the grading environment holds: those the eval's judges name."""
    names: dict[str, None] = {}
    judges = [j for _, case_judges in resolved.cases.profiles for j in case_judges]  # not a case made per row
    for judge in [*judges, *([resolved.pairwise] if resolved.pairwise else [])]:
        names.update(dict.fromkeys(judge.secrets))
    return list(names)


def only(secrets: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The entries of ``secrets`` that ``names`` name (checked to exist by :func:`check_named`)."""
    return {name: secrets[name] for name in names if name in secrets}


def check_named(resolved: ResolvedEval, secrets: Mapping[str, str], secrets_file: Path | None, *,
                clients: bool = True, judges: bool = True) -> None:
    """Every secret a variant (with ``clients``) or a judge (with ``judges``: the command grades)
    names must be in the secrets file."""
    wanted: list[tuple[str, str]] = []
    if clients:
        for i, variant in enumerate(resolved.variants):
            wanted += [(f"variants[{i}] ({variant.id})", n) for n in variant_secret_names(variant)]
    if judges:
        wanted += [("judges", n) for n in judge_secret_names(resolved)]
    source = f"the secrets file {secrets_file}" if secrets_file else "no --secrets-file was given"
    problems = [Problem(str(resolved.path), f"{who} needs the secret {name}, but "
                        + (f"{source} does not define it" if secrets_file else source))
                for who, name in wanted if name not in secrets]
    if problems:
        raise UserError(problems)
