"""A JSONL transcript read lazily (``mst graders run``): the same events, lookups and grader
results as the eager reader; only the events the lookups interpret are decoded; a bad line
they read is named by file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from tests.graders.gsession import ev
from tests.session.test_fuzz_sessions import _session

from mst.cli.graders import graders
from mst.graders import parse_graders_config, run_graders
from mst.session.io import TranscriptError, parse_transcript, read_transcript_lazily
from mst.session.lazy import LazySession, lazy_jsonl
from mst.session.lookups import create_session_lookups

# The fuzz suite's session, and a message whose content nests objects with a "type" of their own.
SESSION = [*_session(), ev("user.message", {"content": "x", "blocks": [{"type": "text", "text": "x"}]})]


def _jsonl(events: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


def _loose(events: list[dict[str, Any]]) -> bytes:
    """Another writer's JSONL: spaces after colons, keys in another order, blank lines, CRLF."""
    lines = []
    for i, e in enumerate(events):
        reordered = {k: e[k] for k in reversed(list(e))} if i % 2 else e
        lines.append(orjson.dumps(reordered).replace(b'":', b'": ') if i % 3 == 0 else orjson.dumps(reordered))
    return b"\r\n\n".join(lines) + b"\n \n"


@pytest.mark.parametrize("raw", [_jsonl(SESSION), _loose(SESSION)], ids=["mst", "loose"])
def test_lazy_session_reads_as_the_eager_one(raw: bytes) -> None:
    lazy = lazy_jsonl(raw, "s.jsonl")
    assert isinstance(lazy, LazySession)
    eager = parse_transcript(raw, "s.jsonl")
    assert list(lazy) == eager == SESSION
    assert lazy.types == [e["type"] for e in SESSION]
    assert lazy[-1] == SESSION[-1] and lazy[2:4] == SESSION[2:4]
    assert create_session_lookups(lazy) == create_session_lookups(eager)
    config = parse_graders_config(None)
    assert run_graders(lazy, config).results == run_graders(eager, config).results


def test_only_the_events_the_lookups_interpret_are_decoded() -> None:
    lazy = lazy_jsonl(_jsonl(SESSION), "s.jsonl")
    assert lazy is not None
    decoded: list[int] = []
    decode = lazy.event
    lazy_event = LazySession.event
    try:
        LazySession.event = lambda self, i: decoded.append(i) or decode(i)  # type: ignore[method-assign]
        create_session_lookups(lazy)
    finally:
        LazySession.event = lazy_event  # type: ignore[method-assign]
    interpreted = {"model.request", "tool.execution_start", "tool.execution_complete", "mcp.rpc.request",
                   "mcp.rpc.response", "session.result", "mcp.event"}  # fmt: skip
    assert decoded and set(decoded) <= {i for i, e in enumerate(SESSION) if e["type"] in interpreted}
    assert 1 not in decoded and 0 not in decoded  # the user message and the format header stay bytes


def test_other_forms_are_left_to_the_eager_reader() -> None:
    one = orjson.dumps(SESSION[0])
    assert lazy_jsonl(one + b"\n", "s") is None
    assert lazy_jsonl(b"[" + b",\n".join(orjson.dumps(e) for e in SESSION) + b"]\n", "s") is None
    assert lazy_jsonl(b"\n\n", "s") is None


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (b'{"type":"tool.execution_start","data":{"toolName": oops}}', "s.jsonl:4: not valid JSON"),
        (b'{"type":"tool.execution_start","data":[],"provenance":{}}', "s.jsonl:4: not a canonical event"),
        (b'{"type":"nodot","data":{},"provenance":{}}', "s.jsonl:4: not a canonical event"),
        (b'{"type": "a.b", "data": {}}', "s.jsonl:4: not a canonical event"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path, line: bytes, fragment: str) -> None:
    raw = _jsonl(SESSION[:2]) + b"\n" + line + b"\n" + _jsonl(SESSION[2:])  # line 3 is blank
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw)
    with pytest.raises(TranscriptError, match=fragment):
        create_session_lookups(read_transcript_lazily(path))
    res = CliRunner().invoke(graders, ["run", str(path)])
    assert res.exit_code == 2 and fragment in res.stderr and "Traceback" not in res.output


def test_replay_of_a_lazy_session_matches_the_eager_one_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_loose(SESSION * 50))
    res = CliRunner().invoke(graders, ["run", "--json", str(path)])
    assert res.exit_code == 0, res.output
    eager = run_graders(parse_transcript(path.read_bytes(), str(path)), parse_graders_config(None))
    assert orjson.loads(res.stdout)["results"] == orjson.loads(orjson.dumps(eager.results))


def test_the_index_of_a_lazy_session_is_the_eager_one() -> None:
    """``by_type`` of a lazily read session finds a type's positions when read; it has the same
    keys in the same (first-seen) order and the same positions as the decoded session's."""
    raw = _jsonl(SESSION * 3)
    lazy = create_session_lookups(lazy_jsonl(raw, "s.jsonl"))  # type: ignore[arg-type]
    eager = create_session_lookups(parse_transcript(raw, "s.jsonl"))
    assert list(lazy.by_type) == list(eager.by_type) and len(lazy.by_type) == len(eager.by_type)
    for etype in eager.by_type:
        assert etype in lazy.by_type and lazy.positions(etype) == eager.positions(etype)
    assert lazy.positions("nothing.here") == () and "nothing.here" not in lazy.by_type
    with pytest.raises(KeyError):
        lazy.by_type["nothing.here"]
    with pytest.raises(TypeError):
        lazy.by_type["x"] = ()  # type: ignore[index]
    assert dict(lazy.by_type) == dict(eager.by_type)


def test_reading_lazily_holds_the_lines_and_little_else() -> None:
    """Memory guard (issue 16: peak ≤ 3× the file end to end): reading finds every line's type
    before making the lines, so the matched type bytes are freed before the lines exist and the
    peak while reading is the file, its lines and a pointer per line (1.3× the file here;
    1.7× when the matches were held beside the lines)."""
    import tracemalloc

    raw = _jsonl(SESSION * 400)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        lazy = lazy_jsonl(raw, "s.jsonl")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert lazy is not None and len(lazy) == len(SESSION) * 400
    assert peak < 1.5 * len(raw), f"peak {peak / len(raw):.2f}× the file while reading"


@pytest.mark.parametrize(
    "raw",
    [
        _jsonl(SESSION).rstrip(b"\n"),  # no final newline
        _jsonl(SESSION[:1]) + b'{"type":"user.m\\u0065ssage","data":{},"provenance":{}}\n' + _jsonl(SESSION[1:]),
        _jsonl(SESSION[:1]) + b'{"data":{},"type":"user.message","provenance":{}}\n' + _jsonl(SESSION[1:]),
    ],
    ids=["no-final-newline", "escaped-type", "type-not-first"],
)
def test_a_line_that_does_not_start_like_an_event_reads_as_eagerly(raw: bytes) -> None:
    """Types are found after each newline only when every line starts like an event; one line
    that does not sends the whole file through the line-by-line reading, with the same result."""
    lazy = lazy_jsonl(raw, "s.jsonl")
    assert lazy is not None
    eager = parse_transcript(raw, "s.jsonl")
    assert list(lazy) == eager and lazy.types == [e["type"] for e in eager]
    assert create_session_lookups(lazy) == create_session_lookups(eager)
