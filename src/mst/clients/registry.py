"""Client kinds by name: the built-ins, then the `mst.clients` entry-point group."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

BUILTIN = {
    "agent": "mst.clients.agent:AgentClient",
    "command": "mst.clients.command:CommandClient",
    "claude-code": "mst.clients.claude_code:ClaudeCodeClient",
    "codex": "mst.clients.codex:CodexClient",
}


class UnknownClient(LookupError):
    pass


def client_class(name: str) -> Any:
    """The class for a client kind; built-ins resolve without scanning entry points."""
    target = BUILTIN.get(name)
    if target is None:
        for ep in entry_points(group="mst.clients"):
            if ep.name == name:
                return ep.load()
        known = sorted(set(BUILTIN) | {ep.name for ep in entry_points(group="mst.clients")})
        raise UnknownClient(f"unknown client {name!r}; known: {', '.join(known)}")
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
