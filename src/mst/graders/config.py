"""The ``graders:`` configuration (docs/graders.md, "Configuration"): parsing, validation and normalisation.

Validation is hand-written rather than a pydantic model because every error must name its
field path exactly (``graders.loops.threshold``) and all errors are reported at once, so a user
fixes a file in one round. Everything accepted is data: the only executable inputs are a custom
grader's inline ``script`` and ``operational-value``'s ``run`` file, and both are only recorded
(with a digest) here; they run in a separate, isolated runtime, never in this process.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Final, Literal

from mst.graders.base import BuiltinGrader, Direction, is_number
from mst.graders.registry import BUILTINS, DEFAULT_IDS, OPERATIONAL_VALUE

ID_PATTERN: Final = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
DATA_FIELDS: Final = (
    "enabled",
    "name",
    "description",
    "unit",
    "direction",
    "threshold",
    "min",
    "max",
    "config",
)
MAX_SCRIPT_BYTES: Final = 256 * 1024
MAX_RUN_BYTES: Final = 64 * 1024
MAX_DATA_DEPTH: Final = 32
_DIRECTIONS: Final[dict[str, Direction]] = {
    "higher": "higher",
    "lower": "lower",
    "higher_is_better": "higher",
    "lower_is_better": "lower",
}
_BASH_SHEBANG: Final = re.compile(r"^#!\s*(?:/usr/bin/env\s+bash|(?:/usr)?(?:/local)?/bin/bash)(?:\s|$)")

Kind = Literal["builtin", "custom", "operational-value"]


class GradersConfigError(ValueError):
    """Invalid ``graders:`` configuration; ``errors`` lists every (field path, message)."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


@dataclass(frozen=True, slots=True)
class GraderSpec:
    """One configured (or defaulted) grader, normalised. ``config`` is a read-only copy."""

    id: str
    kind: Kind
    enabled: bool
    name: str
    description: str
    unit: str
    direction: Direction
    threshold: float | None = None
    min: float | None = None
    max: float | None = None
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    script: str | None = None
    run: str | None = None
    source_digest: str | None = None
    run_source: str | None = None  # operational-value's frozen bytes (UTF-8), never written to a manifest
    # Stable identity: built-ins by id and version; custom code also by its source digest. Made
    # once (every result of every trial carries it); read-only.
    implementation: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind == "builtin":
            impl = BUILTINS[self.id].implementation
        else:
            impl = {"id": "mst.custom/javascript" if self.kind == "custom" else "mst.custom/bash", "version": 1}
            if self.source_digest is not None:
                impl["sourceDigest"] = self.source_digest
        object.__setattr__(self, "implementation", impl)


@dataclass(frozen=True, slots=True)
class GradersConfig:
    """Every grader known to a run, enabled or not, in reporting order (registry order for
    built-ins, then custom ids sorted). Disabled defaults stay listed so that the manifest, and a
    replay from it, keep them disabled (docs/graders.md, "Configuration")."""

    specs: tuple[GraderSpec, ...]
    # Derived once: every graded trial reads them.
    enabled: tuple[GraderSpec, ...] = field(init=False, repr=False, compare=False)
    enabled_ids: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        enabled = tuple(s for s in self.specs if s.enabled)
        object.__setattr__(self, "enabled", enabled)
        object.__setattr__(self, "enabled_ids", frozenset(s.id for s in enabled))

    def get(self, grader_id: str) -> GraderSpec | None:
        return next((s for s in self.specs if s.id == grader_id), None)


# ---------------------------------------------------------------------------------------------
# Field checks


class _Errors:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))


def _check_data(value: Any, path: str, errors: _Errors, depth: int = 0) -> None:
    """JSON-like data only: no objects, no non-finite numbers, bounded nesting."""
    if depth > MAX_DATA_DEPTH:
        errors.add(path, f"nested deeper than {MAX_DATA_DEPTH} levels")
    elif isinstance(value, float) and not math.isfinite(value):
        errors.add(path, "must be a finite number")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_data(item, f"{path}[{i}]", errors, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                errors.add(path, f"keys must be strings, found {key!r}")
            else:
                _check_data(item, f"{path}.{key}", errors, depth + 1)
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        errors.add(path, f"must be plain data (string, number, boolean, list, mapping), not {type(value).__name__}")


def _copy_data(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_data(v) for v in value]
    return value


def _number(entry: Mapping[str, Any], key: str, path: str, errors: _Errors) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if not is_number(value):
        errors.add(f"{path}.{key}", "must be a finite number")
        return None
    return float(value)


def _string(entry: Mapping[str, Any], key: str, path: str, errors: _Errors) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errors.add(f"{path}.{key}", "must be a string")
        return None
    return value


def _direction(entry: Mapping[str, Any], path: str, errors: _Errors) -> Direction | None:
    value = entry.get("direction")
    if value is None:
        return None
    if not isinstance(value, str) or value not in _DIRECTIONS:
        errors.add(f"{path}.direction", "must be 'higher' or 'lower'")
        return None
    return _DIRECTIONS[value]


def _config(entry: Mapping[str, Any], path: str, errors: _Errors, builtin: BuiltinGrader | None) -> dict[str, Any]:
    value = entry.get("config")
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(f"{path}.config", "must be a mapping")
        return {}
    _check_data(value, f"{path}.config", errors)
    if builtin is not None:
        checks = builtin.config or {}
        for key, item in value.items():
            check = checks.get(key) if isinstance(key, str) else None
            if check is None:
                accepted = ", ".join(sorted(checks)) or "none"
                errors.add(f"{path}.config.{key}", f"not a setting of '{builtin.id}' (accepted: {accepted})")
            elif (problem := check(item)) is not None:
                errors.add(f"{path}.config.{key}", problem)
    return _copy_data(value)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# Executable fields (recorded, never executed here)


def _script(entry: Mapping[str, Any], path: str, errors: _Errors) -> tuple[str | None, str | None]:
    script = entry.get("script")
    if not isinstance(script, str) or not script.strip():
        errors.add(f"{path}.script", "a custom grader needs an inline JavaScript 'script'")
        return None, None
    size = len(script.encode("utf-8", "surrogatepass"))
    if size > MAX_SCRIPT_BYTES:
        errors.add(f"{path}.script", f"is {size} bytes; the limit is {MAX_SCRIPT_BYTES} (256 KiB)")
        return None, None
    return script, "sha256:" + hashlib.sha256(script.encode("utf-8", "surrogatepass")).hexdigest()


def _run_path(value: Any, path: str, errors: _Errors) -> PurePosixPath | None:
    """Shape checks that need no file system: a relative ``.sh`` path that stays inside."""
    where = f"{path}.run"
    if not isinstance(value, str) or not value:
        errors.add(where, "operational-value needs 'run': a repository .sh file")
        return None
    pure = PurePosixPath(value)
    if "\\" in value or "\0" in value or pure.is_absolute():
        errors.add(where, "must be a relative path inside the repository (no absolute paths or backslashes)")
    elif ".." in pure.parts:
        errors.add(where, "must not leave the repository ('..' is not allowed)")
    elif pure.suffix != ".sh":
        errors.add(where, "must name a .sh file")
    else:
        return pure
    return None


def _run_file(
    pure: PurePosixPath, raw: str, path: str, errors: _Errors, base: Path, root: Path
) -> tuple[str, str] | None:
    """File checks (docs/graders.md, "Custom graders run apart"): confined, a Bash shebang, ≤ 64 KiB
    of UTF-8, and the shell analysis (no detected file writes or dynamic execution). Returns the
    digest and the frozen source."""
    where = f"{path}.run"
    target = (base if raw.startswith("./") else root) / pure
    try:
        resolved = target.resolve(strict=True)
        resolved.relative_to(root.resolve())
    except FileNotFoundError:
        errors.add(where, f"file not found: {target}")
        return None
    except ValueError:
        errors.add(where, "resolves outside the repository (symbolic link?)")
        return None
    if not resolved.is_file():
        errors.add(where, "is not a regular file")
        return None
    data = resolved.read_bytes()
    if len(data) > MAX_RUN_BYTES:
        errors.add(where, f"is {len(data)} bytes; the limit is {MAX_RUN_BYTES} (64 KiB)")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        errors.add(where, "is not UTF-8 text")
        return None
    if not _BASH_SHEBANG.match(text.split("\n", 1)[0]):
        errors.add(where, "must start with a Bash shebang (#!/bin/bash or #!/usr/bin/env bash)")
        return None
    from mst.graders.custom.bash_check import analyze_shell  # lazy: tree-sitter only when needed

    rejections = analyze_shell(data).rejections
    for rejection in rejections:
        errors.add(where, f"{pure}: {rejection}")
    return None if rejections else ("sha256:" + hashlib.sha256(data).hexdigest(), text)


# ---------------------------------------------------------------------------------------------
# One entry


@dataclass(frozen=True, slots=True)
class _Context:
    base_dir: Path | None
    repo_root: Path | None


_EXTRA: Final[dict[str, tuple[str, ...]]] = {
    "builtin": (),
    "custom": ("script",),
    OPERATIONAL_VALUE: ("run",),
}


def _fields(entry: Mapping[str, Any], path: str, errors: _Errors, kind: Kind) -> None:
    for key in entry:
        if key not in DATA_FIELDS and key not in _EXTRA[kind]:
            errors.add(f"{path}.{key}" if isinstance(key, str) else path, _unsupported(key, kind))


def _unsupported(key: Any, kind: Kind) -> str:
    if key == "script" and kind == "builtin":
        return "built-in graders do not accept 'script' (implementations cannot be overridden)"
    if key == "script":
        return "operational-value does not accept 'script'; use 'run'"
    if key == "run":
        return "only 'operational-value' accepts 'run'"
    return f"unsupported field {key!r} (supported: {', '.join(DATA_FIELDS)})"


def _builtin_identity(entry: Mapping[str, Any], grader: BuiltinGrader, path: str, errors: _Errors) -> None:
    """unit, direction, min and max define the built-in's metric: restating is fine, changing is not."""
    fixed: dict[str, Any] = {
        "unit": grader.unit,
        "direction": grader.direction,
        "min": grader.min,
        "max": grader.max,
    }
    for key, value in fixed.items():
        given = entry.get(key)
        if given is None:
            continue
        normal = _DIRECTIONS.get(given, given) if key == "direction" and isinstance(given, str) else given
        if normal != value:
            errors.add(f"{path}.{key}", f"built-in '{grader.id}' has {key} {value!r}; it cannot be overridden")


def _entry(grader_id: str, entry: Mapping[str, Any], errors: _Errors, ctx: _Context) -> GraderSpec:
    path = f"graders.{grader_id}"
    grader = BUILTINS.get(grader_id)
    kind: Kind = "builtin" if grader else "operational-value" if grader_id == OPERATIONAL_VALUE else "custom"
    _fields(entry, path, errors, kind)
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        errors.add(f"{path}.enabled", "must be true or false")
        enabled = True
    name, description = _string(entry, "name", path, errors), _string(entry, "description", path, errors)
    unit, direction = _string(entry, "unit", path, errors), _direction(entry, path, errors)
    threshold = _number(entry, "threshold", path, errors)
    low, high = _number(entry, "min", path, errors), _number(entry, "max", path, errors)
    if low is not None and high is not None and low > high:
        errors.add(f"{path}.min", f"min {low:g} is greater than max {high:g}")
    config = MappingProxyType(_config(entry, path, errors, grader))
    if grader is not None:
        _builtin_identity(entry, grader, path, errors)
        return GraderSpec(
            grader_id, "builtin", enabled, name or grader.name, description or grader.description,
            grader.unit, grader.direction, threshold if "threshold" in entry else grader.threshold,
            grader.min, grader.max, config,
        )  # fmt: skip
    script = run = digest = run_source = None
    if kind == "custom":
        script, digest = _script(entry, path, errors)
    else:
        pure = _run_path(entry.get("run"), path, errors)
        if pure is not None:
            run = str(entry["run"])
            if ctx.base_dir is not None:
                root = ctx.repo_root or ctx.base_dir
                frozen = _run_file(pure, run, path, errors, ctx.base_dir, root)
                digest, run_source = frozen if frozen is not None else (None, None)
    return GraderSpec(
        grader_id, kind, enabled, name or grader_id, description or "", unit or "", direction or "higher",
        threshold, low, high, config, script, run, digest, run_source,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The whole mapping


def _default_spec(grader_id: str) -> GraderSpec:
    g = BUILTINS[grader_id]
    return GraderSpec(g.id, "builtin", True, g.name, g.description, g.unit, g.direction, g.threshold, g.min, g.max)


def _ordered(specs: Mapping[str, GraderSpec]) -> tuple[GraderSpec, ...]:
    builtins = [specs[i] for i in BUILTINS if i in specs]
    others = [specs[i] for i in sorted(specs) if i not in BUILTINS]
    return (*builtins, *others)


def parse_graders_config(raw: Any, *, base_dir: Path | None = None, repo_root: Path | None = None) -> GradersConfig:
    """Validate the eval file's ``graders:`` value and return the normalised configuration.

    ``None`` and ``{}`` enable the ten defaults; a listed default keeps its place with its own
    settings (``enabled: false`` included); opt-in built-ins and custom graders are enabled by
    being listed. Entries are validated even when disabled, so a typo never hides behind
    ``enabled: false``. ``base_dir`` (the declaring file's directory) and ``repo_root`` (default:
    ``base_dir``) enable the checks on ``operational-value.run`` that read the file; without them
    only the path's shape is checked and no source digest is recorded.
    """
    errors = _Errors()
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise GradersConfigError([("graders", "must be a mapping of grader ids to settings")])
    specs: dict[str, GraderSpec] = {i: _default_spec(i) for i in DEFAULT_IDS}
    ctx = _Context(base_dir, repo_root)
    for key, entry in raw.items():
        path = f"graders.{key}"
        if not isinstance(key, str) or not ID_PATTERN.match(key):
            errors.add(path, "grader ids are lowercase letters, digits and '-', starting with a letter, ≤ 64")
            continue
        if entry is None:
            entry = {}
        if not isinstance(entry, Mapping):
            errors.add(path, "must be a mapping of settings (use {} for the defaults)")
            continue
        specs[key] = _entry(key, entry, errors, ctx)
    if errors.items:
        raise GradersConfigError(errors.items)
    return GradersConfig(_ordered(specs))


__all__ = [
    "DATA_FIELDS",
    "ID_PATTERN",
    "MAX_RUN_BYTES",
    "MAX_SCRIPT_BYTES",
    "GraderSpec",
    "GradersConfig",
    "GradersConfigError",
    "config_from_manifest",
    "parse_graders_config",
]


def config_from_manifest(manifest: Mapping[str, Any]) -> GradersConfig:
    """Rebuild the configuration a persisted ``grader_manifest.json`` describes, for replay.

    Built-in entries go through the same validation as the eval file, so a manifest cannot smuggle
    in an override. Custom entries carry no executable source in a manifest (docs/graders.md), only
    their digest: they are registered, and report that their runtime is not part of this replay.
    """
    entries = manifest.get("graders")
    if manifest.get("schemaVersion") != 2 or not isinstance(entries, list):
        raise GradersConfigError([("manifest", "not a schema-version-2 grader manifest")])
    errors = _Errors()
    specs: dict[str, GraderSpec] = {i: _default_spec(i) for i in DEFAULT_IDS}
    for i, item in enumerate(entries):
        gid = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(gid, str) or not ID_PATTERN.match(gid) or not isinstance(item, Mapping):
            errors.add(f"manifest.graders[{i}]", "needs a valid 'id'")
            continue
        data = {k: v for k, v in item.items() if k in DATA_FIELDS}
        if gid in BUILTINS:
            specs[gid] = _entry(gid, data, errors, _Context(None, None))
            continue
        impl = item.get("implementation")
        digest = impl.get("sourceDigest") if isinstance(impl, Mapping) else None
        kind: Kind = "operational-value" if gid == OPERATIONAL_VALUE else "custom"
        run = item.get("run") if isinstance(item.get("run"), str) else None
        spec = _entry(gid, {**data, **({"script": "manifest"} if kind == "custom" else {"run": run})}, errors,
                      _Context(None, None))  # fmt: skip
        specs[gid] = GraderSpec(
            gid, kind, spec.enabled, spec.name, spec.description, spec.unit, spec.direction,
            spec.threshold, spec.min, spec.max, spec.config, None, run,
            digest if isinstance(digest, str) else None,
        )  # fmt: skip
    if errors.items:
        raise GradersConfigError(errors.items)
    return GradersConfig(_ordered(specs))
