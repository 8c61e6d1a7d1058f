"""The result store against real local servers: moto's S3 server and a GCS emulator on 127.0.0.1.

Each test starts its server on a free port and stops it; the `mst` children reach it through the
backends' standard environment variables (endpoint, credentials), as a user's machine would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from tests.helpers import ROOT, basic_eval, only_run, run_cli, write_eval
from tests.store.files import run_files
from tests.store.servers import Server, s3_env

from mst.errors import UserError
from mst.store import fetch_run, open_store, read_manifest, stored_runs, upload_run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("server", ["s3", "gcs"])
def test_run_grade_list_round_trip(server: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    srv: Server = request.getfixturevalue(server)
    url = srv.url()
    write_eval(tmp_path, basic_eval())
    done = run_cli("run", "eval.yaml", "--results", url, cwd=tmp_path, env=srv.env)
    assert done.returncode == 0, done.stderr
    run = only_run(tmp_path / "runs")
    assert f"stored: {url}/runs/{run.name}" in done.stderr
    store = open_store(url)
    assert orjson.loads(store.fs.cat_file(store.path("latest.json")))["run"] == run.name
    assert [h.id for h in stored_runs(store)] == [run.name]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    graded = run_cli("grade", f"{url}/runs/{run.name}", "--json", cwd=elsewhere, env=srv.env)
    assert graded.returncode == 0, graded.stderr
    assert run_files(elsewhere / "runs" / run.name) == run_files(run)
    listed = run_cli("runs", "list", "--results", url, "--json", cwd=elsewhere, env=srv.env)
    assert listed.returncode == 0, listed.stderr
    rows = orjson.loads(listed.stdout)
    assert [r["regradeOf"] for r in rows] == [None, run.name]
    regrade = read_manifest(store, rows[1]["id"])
    assert all(f.run == run.name for f in regrade.files if f.path.startswith("transcripts/"))


@pytest.mark.parametrize("server", ["s3", "gcs"])
def test_a_tampered_object_is_detected_on_fetch(server: str, request: pytest.FixtureRequest,
                                                finished_run: Path, tmp_path: Path) -> None:
    srv: Server = request.getfixturevalue(server)
    store = open_store(srv.url())
    upload_run(finished_run, store)
    key = store.run_path(finished_run.name, "summary.json")
    data = store.fs.cat_file(key)
    store.fs.pipe_file(key, data.replace(b'"casePass"', b'"casePasz"'))
    with pytest.raises(UserError, match=rf"{srv.url()}/runs/{finished_run.name}/summary.json: does not match"):
        fetch_run(store, finished_run.name, tmp_path / "elsewhere")
    store.fs.rm_file(key)
    with pytest.raises(UserError, match=r"summary.json: missing from the store"):
        fetch_run(store, finished_run.name, tmp_path / "elsewhere")


@pytest.mark.parametrize("server", ["s3", "gcs"])
def test_a_wrong_bucket_is_a_clear_error(server: str, request: pytest.FixtureRequest, finished_run: Path,
                                         tmp_path: Path) -> None:
    srv: Server = request.getfixturevalue(server)
    url = f"{srv.scheme}://no-such-bucket/results"
    done = run_cli("runs", "upload", str(finished_run), "--results", url, cwd=tmp_path, env=srv.env)
    assert done.returncode == 2, done.stderr
    assert f"{url}: not found" in done.stderr and "Traceback" not in done.stderr


def test_no_credentials_is_a_clear_error_and_none_are_recorded(s3: Server, finished_run: Path,
                                                              tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: v for k, v in s3.env.items() if "ACCESS_KEY" not in k})
    done = subprocess.run([sys.executable, "-m", "mst", "runs", "upload", str(finished_run), "--results", s3.url()],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{s3.url()}: no credentials found" in done.stderr
    upload_run(finished_run, open_store(s3.url()))  # with credentials (the fixture's environment)
    store = open_store(s3.url())
    stored = b"".join(store.fs.cat_file(p) for p in store.fs.find(store.path("runs")))
    assert b"testing" not in stored  # the secret key is nowhere in the store


def test_an_upload_killed_midway_leaves_no_manifest_and_uploading_again_finishes(s3: Server,
                                                                                 tmp_path: Path) -> None:
    cases = [{"id": f"c{i}", "prompt": f"say {i}", "expected": str(i)} for i in range(40)]
    write_eval(tmp_path, basic_eval(cases=cases))  # distinct cases: distinct files (identical ones are stored once)
    assert run_cli("run", "eval.yaml", cwd=tmp_path).returncode == 0
    run = only_run(tmp_path / "runs")
    env = {**os.environ, **s3.env, "MST_STORE_PACK_BYTES": "1"}  # a pack per file: many objects
    store = open_store(s3.url())
    prefix = store.run_path(run.name)
    child = subprocess.Popen([sys.executable, "-m", "mst", "runs", "upload", str(run), "--results", s3.url(),
                              "--jobs", "1"], cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            store.fs.invalidate_cache()  # the backend caches listings: look afresh each time
            if store.fs.exists(prefix) and len(store.fs.find(prefix)) > 20:
                break
            time.sleep(0.01)
        assert child.poll() is None, "the upload ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    store.fs.invalidate_cache()
    present = store.fs.find(prefix)
    assert len(present) > 20 and not any(p.endswith("/manifest.json") for p in present)
    assert stored_runs(store) == []
    again = run_cli("runs", "upload", str(run), "--results", s3.url(), cwd=tmp_path,
                    env={"MST_STORE_PACK_BYTES": "1", **s3.env})
    assert again.returncode == 0, again.stderr
    skipped = int(again.stderr.split(" already there")[0].rsplit(", ", 1)[1])
    assert skipped >= 20
    assert [h.id for h in stored_runs(store)] == [run.name]
    assert run_files(fetch_run(store, run.name, tmp_path / "elsewhere")) == run_files(run)


def test_s3_env_names_only_the_standard_variables() -> None:
    assert all(k.startswith("AWS_") for k in s3_env(1))
