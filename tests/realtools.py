"""The real programs the integration tests drive, installed once into a cache the tests share.

The tests run the real `claude` and `codex` CLIs and the MCP project's reference servers, not
stand-ins: drift in their formats must fail CI. They are installed at pinned versions, from npm
and PyPI, into ``$MST_TEST_TOOLS`` (default ``~/.cache/mst-test-tools``), one folder per set of
pins, on first use; a lock makes concurrent test processes wait for one install instead of racing.
The Python servers get a virtual environment of their own: they pin their own ``mcp``, which
need not be the one mst is tested with, and users run them as separate programs anyway.

A failed install is an error, never a skip: a machine without these programs cannot prove what
the tests claim.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

NPM_PACKAGES: dict[str, str] = {
    "@anthropic-ai/claude-code": "2.1.332",
    "@openai/codex": "0.171.0",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
}
PY_PACKAGES: dict[str, str] = {
    "mcp-server-time": "2026.10.19",
    "mcp-server-git": "2026.10.19",
}

# The program each name stands for, and where it lives inside the install.
_NPM_BINS = {"claude": "claude", "codex": "codex", "server-everything": "mcp-server-everything",
             "server-filesystem": "mcp-server-filesystem"}
_PY_BINS = {"mcp-server-time": "mcp-server-time", "mcp-server-git": "mcp-server-git"}


class ToolInstallError(RuntimeError):
    """The pinned programs could not be installed: the message carries the installer's output."""


def cache_root() -> Path:
    return Path(os.environ.get("MST_TEST_TOOLS") or Path.home() / ".cache" / "mst-test-tools")


def _pins_digest() -> str:
    pins = sorted(NPM_PACKAGES.items()) + sorted(PY_PACKAGES.items()) + [("python", sys.version.split()[0])]
    return hashlib.sha256(repr(pins).encode()).hexdigest()[:12]


def install_dir() -> Path:
    return cache_root() / _pins_digest()


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        output = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        raise ToolInstallError(f"{' '.join(argv)} exited {done.returncode}:\n{output}")


def _install(target: Path) -> None:
    """Install in place (a venv's scripts name their interpreter by absolute path, so it is built
    where it stays); ``.complete`` is written last, and a folder without it is thrown away."""
    if shutil.which("npm") is None:
        raise ToolInstallError("npm is not on PATH: the integration tests need Node.js with npm")
    (target / "npm").mkdir(parents=True)
    specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(target / "npm"), *specs],
         target)
    _run([sys.executable, "-m", "venv", str(target / "py")], target)
    _run([str(target / "py" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
          *[f"{name}=={version}" for name, version in PY_PACKAGES.items()]], target)
    (target / ".complete").write_text("ok\n")


def ensure_installed() -> Path:
    """The install folder, installing the pinned programs first if this machine lacks them."""
    target = install_dir()
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            _install(target)
    return target


def tool(name: str) -> Path:
    """Absolute path of one real program: ``claude``, ``codex``, ``server-everything``,
    ``server-filesystem``, ``mcp-server-time``, ``mcp-server-git`` or ``chromium``."""
    if name in _APT_TOOLS:
        return apt_tool(name)
    root = ensure_installed()
    if name in _NPM_BINS:
        return root / "npm" / "node_modules" / ".bin" / _NPM_BINS[name]
    if name in _PY_BINS:
        return root / "py" / "bin" / _PY_BINS[name]
    raise KeyError(f"unknown tool {name!r}; known: {sorted(_NPM_BINS) + sorted(_PY_BINS) + sorted(_APT_TOOLS)}")


_APT_TOOLS = {"chromium": "chromium"}  # program name → the Debian package that provides it


def apt_tool(name: str) -> Path:
    """A program from a Debian package (``chromium``), installed with apt-get when this machine
    lacks it and the tests run as root; under the same lock as the pinned programs, so concurrent
    test processes wait for one install. Missing and not installable is an error, never a skip."""
    found = shutil.which(name)
    if found:
        return Path(found)
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".lock-apt", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which(name)
        if found:
            return Path(found)
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise ToolInstallError(f"{name} is not on PATH and cannot be installed here (apt-get as root): "
                                   f"install the Debian package {_APT_TOOLS[name]!r}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", _APT_TOOLS[name]]):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env)
            if done.returncode != 0:
                raise ToolInstallError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    found = shutil.which(name)
    if not found:
        raise ToolInstallError(f"apt-get installed {_APT_TOOLS[name]!r} but {name} is still not on PATH")
    return Path(found)
