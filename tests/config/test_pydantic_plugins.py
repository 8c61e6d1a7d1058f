"""pydantic's plugin lookup stands in without importlib.metadata, and a declared plugin still loads
(mst.config.pydantic_plugins; bench/perf16_startup.md, Session 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUILD_A_MODEL = """
import sys
import mst.cli.main
from pydantic import BaseModel
class M(BaseModel):
    x: int
assert M(x=1).x == 1
import mst.api
print(sorted(m for m in ("importlib.metadata", "email") if m in sys.modules))
"""

PLUGIN = """
class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        print("plugin saw", schema_type_path.name)
        return None, None, None
plugin = Plugin()
"""


def _python(code: str, path: Path | None = None) -> str:
    env = dict(os.environ)
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_no_plugin_declared_no_importlib_metadata() -> None:
    assert _python(BUILD_A_MODEL).strip().splitlines()[-1] == "[]"


def test_a_declared_plugin_still_loads(tmp_path: Path) -> None:
    (tmp_path / "fake_pydantic_plugin.py").write_text(PLUGIN)
    info = tmp_path / "fake_pydantic_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pydantic-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nfake = fake_pydantic_plugin:plugin\n")
    assert "plugin saw M" in _python(BUILD_A_MODEL, tmp_path)


def test_other_names_of_the_loader_come_from_pydantics_own() -> None:
    out = _python("import mst.cli.main, pydantic.plugin\n"
                  "from pydantic.plugin import _loader\nprint(_loader.PYDANTIC_ENTRY_POINT_GROUP)")
    assert out.strip() == "pydantic"


def test_a_library_import_of_mst_keeps_pydantics_own_loader() -> None:
    """Only the `mst` command stands in; `import mst` in a user's program changes nothing of pydantic's."""
    out = _python("import mst, mst.api, sys\nimport pydantic.plugin._loader as loader\n"
                  "print(hasattr(loader, 'PYDANTIC_ENTRY_POINT_GROUP'), 'importlib.metadata' in sys.modules)")
    assert out.strip() == "True True"
