"""One redactor: every place that removes secrets from text or an ending calls mst.session.redact."""

from __future__ import annotations

from pathlib import Path

import pytest

from mst.endings import Infrastructure, Trial
from mst.session.redact import REDACTED, Redactor

SECRETS = {"KEY": "sk-live-123456", "TOKEN": "tok-abcdef"}
SRC = Path(__file__).resolve().parents[2] / "src" / "mst"


def test_ending_text_is_redacted_and_the_rest_kept() -> None:
    r = Redactor.of(SECRETS)
    infra = r.ending(Infrastructure("provider-api", "401 for key sk-live-123456", True))
    assert infra == Infrastructure("provider-api", f"401 for key {REDACTED}", True)
    trial = r.ending(Trial("client-error", "echoed tok-abcdef twice: tok-abcdef"))
    assert trial == Trial("client-error", f"echoed {REDACTED} twice: {REDACTED}")
    plain = Trial("completed")
    assert r.ending(plain) is plain and Redactor().ending(infra) is infra


def _clients_helpers() -> list[object]:
    from mst.agentcli import process as _cli
    from mst.clients import _mcp, agent, claude_code, codex, command
    from mst.providers import _errors

    return [_cli.redact, _mcp.redact, command._redact, lambda t, s: _errors.clean(t, s.values()),
            lambda t, s: agent._scrub(Trial("client-error", t), s).detail,
            lambda t, s: claude_code._scrub(Infrastructure("client-app", t, True), s).why,
            lambda t, s: codex._scrub(Infrastructure("network", t, True), s).why]  # fmt: skip


@pytest.mark.parametrize("helper", _clients_helpers())
def test_every_client_and_provider_helper_redacts_alike(helper: object) -> None:
    text = "failed with sk-live-123456 and tok-abcdef"
    assert helper(text, SECRETS) == Redactor.of(SECRETS).text(text) == f"failed with {REDACTED} and {REDACTED}"  # type: ignore[operator]


def test_no_other_module_replaces_secrets_itself() -> None:
    """The marker is written by the redactor alone: no second copy of the replacement exists."""
    holders = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "[REDACTED]" in p.read_text())
    assert holders == ["session/redact.py"]
