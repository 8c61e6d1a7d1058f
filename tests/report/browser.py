"""Headless Chromium driven through its DevTools protocol, for the report's tests.

The real browser (Debian's ``chromium``, installed by ``tests.realtools``) loads the page the
user opens; the tests read what it drew, click like a user (mouse events at an element's place),
and collect every console error and uncaught exception the page raised.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket
from tests.realtools import tool


class BrowserError(AssertionError):
    pass


class Page:
    """One tab: commands in order, events buffered while waiting for a reply."""

    def __init__(self, ws_url: str) -> None:
        self._ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == msg_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.append(str((details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")) + " " + str(params["entry"].get("url", "")))

    def wait_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        while time.monotonic() < deadline:
            for message in self.events[seen:]:
                if message.get("method") == method:
                    return message
            seen = len(self.events)
            self._ws.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self._event(json.loads(self._ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise BrowserError(f"no {method} within {timeout} s")

    def navigate(self, url: str) -> float:
        """Open ``url`` and wait for its load event; the seconds it took."""
        self.events.clear()
        started = time.monotonic()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - started

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def wait_for(self, expression: str, timeout: float = 10) -> Any:
        """Poll ``expression`` until it is truthy (an error counts as not yet: the page may be
        between two documents)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except BrowserError as exc:
                value, last = None, exc
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"not true within {timeout} s: {expression} (last error: {last})")

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the first element matching ``selector``."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                            " if (!e) return null; e.scrollIntoView({block: 'center'});"
                            " const r = e.getBoundingClientRect();"
                            " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self._ws.close()


class Chromium:
    """A headless Chromium on 127.0.0.1 (DevTools port chosen by the browser), stopped on close."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self._profile = tempfile.mkdtemp(prefix="mst-chromium-")
        argv = [str(tool("chromium")), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0", f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
                "about:blank"]
        self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = self._devtools_port()

    def _devtools_port(self) -> int:
        assert self._proc.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line and self._proc.poll() is not None:
                break
            lines.append(line)
            if "DevTools listening on ws://" in line:  # then drain stderr so a full pipe never blocks it
                threading.Thread(target=self._proc.stderr.read, daemon=True).start()
                return int(line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.close()
        raise BrowserError("chromium did not start:\n" + "".join(lines[-30:]))

    def page(self) -> Page:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as reply:
            targets = json.loads(reply.read())
        pages = [t for t in targets if t.get("type") == "page"]
        return Page(pages[0]["webSocketDebuggerUrl"])

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)
