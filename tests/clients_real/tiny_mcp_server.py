"""A minimal MCP server over stdio in the standard library only (JSON-RPC 2.0, `echo` and `sleep`).

Real MCP on the wire (initialize, tools/list, tools/call, ping), but it starts in milliseconds
instead of the seconds the SDK's import costs, so leak tests can start it hundreds of times.
With ``TINY_MCP_KILL_PARENT=1`` in its environment a tool call SIGKILLs the server's parent
instead (the client that started it crashes mid-call).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def reply(msg_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue  # a notification
        if method == "initialize":
            reply(msg_id, {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny", "version": "1"}})
        elif method == "tools/list":
            reply(msg_id, {"tools": [{"name": "echo", "description": "Echo the text back.",
                                      "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                                                      "required": ["text"]}},
                                     {"name": "sleep", "description": "Sleep, then answer.",
                                      "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}},
                                                      "required": ["seconds"]}}]})
        elif method == "tools/call" and os.environ.get("TINY_MCP_KILL_PARENT") == "1":
            os.kill(os.getppid(), signal.SIGKILL)
        elif method == "tools/call" and msg["params"].get("name") == "sleep":
            # Busy: reads nothing (not even the end of its stdin) until it has slept.
            time.sleep(float(msg["params"].get("arguments", {}).get("seconds", 0)))
            reply(msg_id, {"content": [{"type": "text", "text": "slept"}], "isError": False})
        elif method == "tools/call":
            text = str(msg["params"].get("arguments", {}).get("text", ""))
            reply(msg_id, {"content": [{"type": "text", "text": text}], "isError": False})
        else:
            reply(msg_id, {})


if __name__ == "__main__":
    main()
