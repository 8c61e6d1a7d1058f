"""An MCP server (stdio) whose tools misbehave: one is slow, one kills the server mid-call."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer(name="flaky", log_level="WARNING")


@mcp.tool()
async def slow(seconds: float) -> str:
    """Answer after ``seconds``."""
    await asyncio.sleep(seconds)
    return "finally"


@mcp.tool()
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@mcp.tool()
def die() -> str:
    """Exit the server process without answering."""
    os._exit(1)


if __name__ == "__main__":
    mcp.run()
