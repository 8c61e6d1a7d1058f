"""mst: evaluate AI agents and clients on eval cases, with honest statistics."""

__version__ = "0.1.0"
