"""The manifest a stored run ends with (docs/result-store.md): what is in the store, and how to check it.

A run's upload writes every object first and ``manifest.json`` last, so a run without one is
incomplete and nothing reads it as a run. The manifest is also the only thing fetching trusts:
every object is checked against its size and SHA-256 here before a byte of it is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mst.errors import Problem, UserError
from mst.runs.record_files import read_record_file

MANIFEST = "manifest.json"
MANIFEST_SCHEMA: Literal["mst.store-manifest/v1"] = "mst.store-manifest/v1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)


class RunHead(_Model):
    """What `mst runs list` shows of a run, read from its run.json and summary.json heads."""

    id: str
    eval: str
    createdAt: str | None = None
    phases: dict[str, str] = Field(default_factory=dict)
    regradeOf: str | None = None
    passRates: dict[str, float | None] = Field(default_factory=dict)  # per variant, summary.json's passRate


class StoredObject(_Model):
    """One object this run's upload wrote, relative to the run's prefix."""

    key: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class StoredFile(_Model):
    """One file of the run directory and where its bytes are: a whole object (``offset`` null) or
    a slice of a pack; in this run's prefix (``run`` null) or in the source run's (a regrade's
    transcripts and artifacts are referred to, not copied)."""

    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    object: str
    offset: int | None = Field(default=None, ge=0)
    run: str | None = None


class Manifest(_Model):
    schema_: Literal["mst.store-manifest/v1"] = Field(default=MANIFEST_SCHEMA, alias="schema")
    run: RunHead
    objects: list[StoredObject]
    files: list[StoredFile]

    def to_bytes(self) -> bytes:
        import orjson

        return orjson.dumps(self.model_dump(mode="json", by_alias=True))

    @classmethod
    def parse(cls, data: bytes, where: str) -> Manifest:
        from pydantic import ValidationError

        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise UserError(Problem(where, f"not a valid manifest: {first['msg']}", field)) from None


def run_head(run_dir: Path) -> RunHead:
    """The listing head of a local run directory (its run.json and, when written, summary.json)."""
    head = read_record_file(run_dir / "run.json", "run.json", "attempts").head
    rates: dict[str, float | None] = {}
    summary = run_dir / "summary.json"
    if summary.is_file():
        for variant in read_record_file(summary, "summary.json", "cases").head.get("variants", []):
            rates[str(variant.get("id"))] = _estimate(variant.get("passRate"))
    return RunHead(id=str(head.get("id", run_dir.name)), eval=str((head.get("eval") or {}).get("name", "")),
                   createdAt=head.get("createdAt"), phases=dict(head.get("phases") or {}),
                   regradeOf=head.get("regradeOf"), passRates=rates)


def _estimate(rate: Any) -> float | None:
    if isinstance(rate, dict) and isinstance(rate.get("estimate"), int | float):
        return float(rate["estimate"])
    return None
