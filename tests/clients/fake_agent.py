"""A stand-in command-line agent for the command client's tests: behaviour chosen by argv[1]."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def sleeper() -> None:
    # A grandchild that would outlive the command if nothing killed its process group.
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def event(type_: str, data: dict[str, object]) -> str:
    return json.dumps({"type": type_, "data": data, "provenance": {"component": "fake", "phase": "agent"}})


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "echo":
        print(" ".join(rest))
    elif mode == "stdin":
        print("got: " + sys.stdin.read())
    elif mode == "env":
        print(
            json.dumps(
                {
                    "argv": sys.argv,
                    "key": os.environ.get("API_KEY"),
                    "extra": os.environ.get("EXTRA"),
                    "case": os.environ["MST_CASE_ID"],
                    "cwd": os.getcwd(),
                    "artifacts": os.environ["MST_ARTIFACTS_DIR"],
                }
            )
        )
    elif mode == "fail":
        sys.stderr.write("something broke; token=" + os.environ.get("API_KEY", "") + "\n")
        sys.exit(2)
    elif mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "transcript":
        lines = [
            event("session.format", {"version": 1}),
            event("user.message", {"content": "q"}),
            event("model.request", {"model": "m", "inputTokens": 10, "outputTokens": 3}),
            event("model.request", {"model": "m", "inputTokens": 20, "outputTokens": 4}),
            event("assistant.message", {"content": "the answer"}),
        ]
        Path(os.environ["MST_TRANSCRIPT"]).write_text("\n".join(lines) + "\n")
        print("the answer")
    elif mode == "bad-transcript":
        Path(os.environ["MST_TRANSCRIPT"]).write_text('{"type": "x.y", "data": {}, "provenance": {}}\nnot json\n')
        print("the answer")
    elif mode == "answer-file":
        Path(rest[0]).write_text("  from the file \n")
        print("ignored stdout")
    elif mode == "sleep":
        sleeper()
        time.sleep(60)
    elif mode == "daemon":
        sleeper()
        print("done")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
