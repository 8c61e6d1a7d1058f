"""Client kinds by name, through the one plugin registry (:mod:`mst.config.plugins`)."""

from __future__ import annotations

from typing import Any

from mst.config.plugins import CLIENTS, UnknownPlugin, load

BUILTIN = CLIENTS.builtin
UnknownClient = UnknownPlugin


def client_class(name: str) -> Any:
    """The class for a client kind; built-ins resolve without scanning entry points."""
    return load(CLIENTS, name)
