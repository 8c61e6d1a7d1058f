"""The result store on a file:// URL: upload order, round trip, references, faults, listing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.helpers import basic_eval, load, run_cli, write_eval
from tests.store.files import run_files

from mst.errors import UserError
from mst.store import fetch_run, local_runs, open_store, read_manifest, stored_runs, upload_run


def test_every_object_then_the_manifest_then_latest(finished_run: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(f"file://{tmp_path}/store")
    written: list[str] = []
    real = store.fs.pipe_file

    def recording(path: str, data: bytes, **kw: Any) -> None:
        written.append(path.rsplit(f"{finished_run.name}/", 1)[-1])
        real(path, data, **kw)

    monkeypatch.setattr(store.fs, "pipe_file", recording)
    report = upload_run(finished_run, store, jobs=4)
    assert written[-2:] == ["manifest.json", str(tmp_path / "store" / "latest.json")]
    assert {"run.json", "summary.json", "results.json", "attempts.jsonl"} <= set(written[:-2])
    assert any(w.startswith("packs/transcripts-") for w in written)
    assert report.uploaded == len(written) - 2 and report.skipped == 0
    latest = orjson.loads((tmp_path / "store" / "latest.json").read_bytes())
    assert latest == {"run": finished_run.name, "url": f"file://{tmp_path}/store/runs/{finished_run.name}"}


def test_fetched_run_is_the_uploaded_run_and_every_object_is_in_the_manifest(finished_run: Path,
                                                                               tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    manifest = read_manifest(store, finished_run.name)
    stored = {p.relative_to(tmp_path / "store" / "runs" / finished_run.name).as_posix()
              for p in (tmp_path / "store" / "runs" / finished_run.name).rglob("*") if p.is_file()}
    assert stored - {"manifest.json"} == {o.key for o in manifest.objects}
    assert {f.path for f in manifest.files} == set(run_files(finished_run))
    fetched = fetch_run(store, finished_run.name, tmp_path / "elsewhere")
    assert run_files(fetched) == run_files(finished_run)


def test_uploading_again_skips_what_is_there(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    first = upload_run(finished_run, store, pack_bytes=2048)
    again = upload_run(finished_run, store, pack_bytes=2048)
    assert first.uploaded > 5 and again.uploaded == 0 and again.skipped == first.uploaded


def test_a_changed_object_is_uploaded_again(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    stored = tmp_path / "store" / "runs" / finished_run.name / "summary.json"
    stored.write_bytes(stored.read_bytes().replace(b"{", b"[", 1))  # same size, other bytes
    again = upload_run(finished_run, store)
    assert again.uploaded == 1
    assert stored.read_bytes() == (finished_run / "summary.json").read_bytes()


def test_a_run_without_manifest_is_no_run(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    (tmp_path / "store" / "runs" / finished_run.name / "manifest.json").unlink()
    assert stored_runs(store) == []
    with pytest.raises(UserError, match="no manifest"):
        fetch_run(store, finished_run.name, tmp_path / "elsewhere")


def test_a_tampered_object_is_named_and_nothing_is_left(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    pack = next((tmp_path / "store" / "runs" / finished_run.name / "packs").glob("transcripts-*.tar"))
    data = bytearray(pack.read_bytes())
    data[600] ^= 1
    pack.write_bytes(bytes(data))
    with pytest.raises(UserError, match=rf"{pack.name}: does not match the manifest"):
        fetch_run(store, finished_run.name, tmp_path / "elsewhere")
    assert list((tmp_path / "elsewhere").iterdir()) == []  # the staging directory is gone


def test_a_missing_object_is_named(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    (tmp_path / "store" / "runs" / finished_run.name / "results.json").unlink()
    with pytest.raises(UserError, match=r"runs/.*/results\.json: missing from the store"):
        fetch_run(store, finished_run.name, tmp_path / "elsewhere")


def test_listing_local_and_stored_runs(finished_run: Path, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    summary = load(finished_run / "summary.json")
    expected = {v["id"]: v["passRate"]["estimate"] for v in summary["variants"]}
    for heads in (local_runs(finished_run.parent), stored_runs(store)):
        (head,) = heads
        assert (head.id, head.eval, head.phases) == (finished_run.name, "t", {"collect": "complete",
                                                                              "grade": "complete"})
        assert head.passRates == expected
    listed = run_cli("runs", "list", "--results", f"file://{tmp_path}/store", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in orjson.loads(listed.stdout)] == [finished_run.name]
    table = run_cli("runs", "list", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert finished_run.name in table.stdout and "base 100%" in table.stdout.replace("\u2026", "")


def test_run_uploads_to_the_store_the_eval_names(tmp_path: Path) -> None:
    write_eval(tmp_path, basic_eval(results={"store": "file://store"}))
    done = run_cli("run", "eval.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "stored: file://" in done.stderr
    (run_id,) = [p.name for p in (tmp_path / "store" / "runs").iterdir()]
    assert (tmp_path / "store" / "runs" / run_id / "manifest.json").is_file()
    assert load(tmp_path / "store" / "latest.json")["run"] == run_id


def test_a_regrade_refers_to_its_source_and_is_fetched_whole(finished_run: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    done = run_cli("grade", str(finished_run), "--results", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = open_store(url)
    heads = {h.id: h for h in stored_runs(store)}
    assert set(heads) > {finished_run.name}  # the source was uploaded first
    (regrade_id,) = [i for i, h in heads.items() if h.regradeOf == finished_run.name]
    manifest = read_manifest(store, regrade_id)
    transcripts = [f for f in manifest.files if f.path.startswith("transcripts/")]
    assert transcripts and all(f.run == finished_run.name for f in transcripts)
    assert not any(o.key.startswith("packs/transcripts-") for o in manifest.objects)
    fetched = fetch_run(store, regrade_id, tmp_path / "elsewhere")
    assert run_files(fetched) == run_files(finished_run.parent / regrade_id)


def test_grade_a_run_that_is_only_in_the_store(finished_run: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    upload_run(finished_run, open_store(url))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("grade", f"{url}/runs/{finished_run.name}", "--json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert run_files(elsewhere / "runs" / finished_run.name) == run_files(finished_run)
    regrade = load(elsewhere / "runs" / "latest.json")["run"]
    assert load(elsewhere / "runs" / regrade / "run.json")["regradeOf"] == finished_run.name
    assert regrade in {h.id for h in stored_runs(open_store(url))}  # stored where it came from
    # By id with --results, from a third place, the stored regrade is fetched with its references.
    third = tmp_path / "third"
    third.mkdir()
    again = run_cli("grade", regrade, "--results", url, "--json", cwd=third)
    assert again.returncode == 0, again.stderr
    assert run_files(third / "runs" / regrade)["summary.json"] == run_files(elsewhere / "runs" / regrade)[
        "summary.json"]


def test_a_tampered_store_stops_grade_with_exit_2(finished_run: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    upload_run(finished_run, open_store(url))
    run_json = tmp_path / "store" / "runs" / finished_run.name / "run.json"
    run_json.write_bytes(run_json.read_bytes() + b" ")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("grade", f"{url}/runs/{finished_run.name}", cwd=elsewhere)
    assert done.returncode == 2
    assert f"{url}/runs/{finished_run.name}/run.json: does not match the manifest" in done.stderr
    assert not (elsewhere / "runs" / finished_run.name).exists()
    shutil.rmtree(elsewhere)


def test_a_store_url_of_another_scheme_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a result store URL"):
        open_store("ftp://example/x")


def test_the_cli_does_not_import_a_store_backend_until_a_store_is_used() -> None:
    import subprocess
    import sys

    code = ("import sys; from mst.cli.main import main; main.list_commands(None); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fsspec', 's3fs', 'gcsfs') "
            "or m.startswith('mst.store')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_identical_files_are_stored_once(finished_run: Path, tmp_path: Path) -> None:
    # Two trials' artifacts with the same bytes (a fixture file every attempt writes, say).
    for trial in ("0", "1"):
        folder = finished_run / "artifacts" / "same" / trial
        folder.mkdir(parents=True)
        (folder / "fixture.bin").write_bytes(b"the same bytes\n" * 1000)
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    manifest = read_manifest(store, finished_run.name)
    shared = {(f.object, f.offset) for f in manifest.files if f.path.endswith("/fixture.bin")}
    assert len(shared) == 1  # stored once, listed twice
    assert sum(f.path.endswith("/fixture.bin") for f in manifest.files) == 2
    assert run_files(fetch_run(store, finished_run.name, tmp_path / "elsewhere")) == run_files(finished_run)


def test_the_eval_files_store_must_be_a_store_url(tmp_path: Path) -> None:
    write_eval(tmp_path, basic_eval(results={"store": "ftp://host/x"}))
    done = run_cli("validate", "eval.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "results.store" in done.stderr


def test_grade_of_a_url_that_names_no_run_is_refused(tmp_path: Path) -> None:
    done = run_cli("grade", f"file://{tmp_path}/store", cwd=tmp_path)
    assert done.returncode == 2
    assert "not a stored run: expected <store URL>/runs/<run id>" in done.stderr


def test_the_grader_manifest_is_uploaded_and_a_fetched_run_reads_its_graded_sessions(finished_run: Path,
                                                                                     tmp_path: Path) -> None:
    """The trials' records name the run's one grader manifest: without it no graded session reads."""
    from mst.runs.graded import graded_session

    [manifest_file] = (finished_run / "graders").iterdir()
    store = open_store(f"file://{tmp_path}/store")
    upload_run(finished_run, store)
    assert f"graders/{manifest_file.name}" in {f.path for f in read_manifest(store, finished_run.name).files}
    fetched = fetch_run(store, finished_run.name, tmp_path / "elsewhere")
    assert (fetched / "graders" / manifest_file.name).read_bytes() == manifest_file.read_bytes()
    for trial in load(finished_run / "results.json")["trials"]:
        key = (trial["variant"], trial["case"], trial["trial"])
        session = graded_session(fetched, *key)
        assert session == graded_session(finished_run, *key) and session[-1]["type"] == "grader.result"
