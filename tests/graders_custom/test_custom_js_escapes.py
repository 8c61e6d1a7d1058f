"""The escape corpus: each test is one attempt by a custom JavaScript grader to reach a capability
it must not have (docs/graders.md). Every attempt is contained — recorded as an error, or for the
harmless ones a value that proves nothing leaked — and nothing is written outside the temp dir."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
from customkit import FAST, listening_server, needs_isolation, run_js, sample_session

from mst.graders.custom.js import JsLimits

pytestmark = needs_isolation


def _target(tmp_path: Path) -> str:
    return str(tmp_path / "escaped.txt")


def _contained(outcome: object, fragment: str = "") -> None:
    error = getattr(outcome, "error", None)
    assert error is not None, f"attempt was not stopped: {outcome}"
    assert fragment in error


# --- files ---------------------------------------------------------------------------------------


def test_read_file_with_require() -> None:
    _contained(run_js("return require('fs').readFileSync('/etc/passwd', 'utf8').length"), "require is not defined")


def test_write_file_with_require(tmp_path: Path) -> None:
    target = _target(tmp_path)
    _contained(run_js(f"require('fs').writeFileSync({target!r}, 'x'); return 1"), "require is not defined")
    assert not Path(target).exists()


def test_write_file_through_host_function_constructor(tmp_path: Path) -> None:
    target = _target(tmp_path)
    script = f"this.constructor.constructor(\"process.mainModule.require('fs').writeFileSync({target!r}, 'x')\")()"
    _contained(run_js(script + "; return 1"), "Code generation from strings disallowed")
    assert not Path(target).exists()


def test_input_objects_lead_back_to_this_context_only(tmp_path: Path) -> None:
    target = _target(tmp_path)
    escape = 'session.constructor.constructor("return process")()'
    script = f"return {escape}.mainModule.require('fs').writeFileSync({target!r}, 'x')"
    _contained(run_js(script), "Code generation from strings disallowed")
    assert not Path(target).exists()


# --- modules, process ----------------------------------------------------------------------------


def test_require_is_absent() -> None:
    assert (
        run_js(
            "return [typeof require, typeof module, typeof exports, typeof __filename]"
            ".every(t => t === 'undefined') ? 1 : 0"
        ).value
        == 1
    )


def test_dynamic_import_is_refused(tmp_path: Path) -> None:
    target = _target(tmp_path)
    outcome = run_js(f"return import('node:fs').then(fs => fs.writeFileSync({target!r}, 'x'))")
    _contained(outcome)
    assert not Path(target).exists()


def test_process_is_absent() -> None:
    _contained(run_js("return process.pid"), "process is not defined")


def test_process_binding_is_absent() -> None:
    _contained(run_js("return process.binding('spawn_sync')"), "process is not defined")


def test_global_this_process_lookup_finds_nothing() -> None:
    script = (
        "return [globalThis.process, globalThis.Buffer, globalThis.global, globalThis.console]"
        ".every(v => v === undefined) ? 1 : 0"
    )
    assert run_js(script).value == 1


def test_child_process_cannot_be_reached(tmp_path: Path) -> None:
    target = _target(tmp_path)
    _contained(run_js(f"require('child_process').execSync('touch {target}'); return 1"), "require is not defined")
    assert not Path(target).exists()


def test_worker_threads_cannot_be_reached() -> None:
    _contained(run_js("new (require('worker_threads').Worker)('1', {eval: true}); return 1"), "require is not defined")


def test_runtime_handover_slots_are_gone() -> None:
    script = (
        "return ['__mstPayload', '__mstConfig', '__mstGrader', '__mstMaxMessage']"
        ".every(k => !(k in globalThis)) ? 1 : 0"
    )
    assert run_js(script).value == 1


# --- network ------------------------------------------------------------------------------------


def test_fetch_to_a_local_server_sends_nothing() -> None:
    with listening_server() as (port, received):
        outcome = run_js(f"return fetch('http://127.0.0.1:{port}/steal?x=' + session.length)")
        time.sleep(0.3)
    _contained(outcome, "fetch is not defined")
    assert received == []


def test_net_socket_to_a_local_server_sends_nothing() -> None:
    with listening_server() as (port, received):
        outcome = run_js(f"require('net').connect({port}, '127.0.0.1').write('secret'); return 1")
        time.sleep(0.3)
    _contained(outcome, "require is not defined")
    assert received == []


# --- code generation ------------------------------------------------------------------------------


def test_webassembly_is_absent() -> None:
    _contained(run_js("return new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])) ? 1 : 0"),
               "WebAssembly is not defined")  # fmt: skip


def test_eval_is_refused() -> None:
    _contained(run_js("return eval('1 + 1')"), "eval is not defined")


def test_function_constructor_is_refused() -> None:
    _contained(run_js("return Function('return 1')()"), "Function is not defined")


def test_function_constructor_through_a_prototype_is_refused() -> None:
    _contained(run_js("return (function () {}).constructor('return 1')()"), "Code generation from strings disallowed")


def test_prepare_stack_trace_cannot_be_installed() -> None:
    script = (
        "try { Error.prepareStackTrace = () => 'hijacked' } catch (e) {} "
        "return new Error('x').stack === 'hijacked' ? 1 : 0"
    )
    assert run_js(script).value == 0


# --- clocks, randomness, timers -------------------------------------------------------------------


def test_timers_are_absent() -> None:
    _contained(run_js("setTimeout(() => {}, 0); return 1"), "setTimeout is not defined")


def test_date_is_absent() -> None:
    _contained(run_js("return Date.now()"), "Date is not defined")


def test_intl_clock_is_absent() -> None:
    _contained(run_js("return new Intl.DateTimeFormat().format().length"), "Intl is not defined")


def test_math_random_is_absent() -> None:
    _contained(run_js("return Math.random()"), "Math.random is not a function")


def test_shared_memory_is_absent() -> None:
    assert (
        run_js("return typeof SharedArrayBuffer === 'undefined' && typeof Atomics === 'undefined' ? 1 : 0").value == 1
    )


# --- inputs ---------------------------------------------------------------------------------------


def test_mutating_the_input_fails_and_changes_nothing() -> None:
    session = sample_session()
    before = copy.deepcopy(session)
    _contained(run_js("'use strict'; session[1].type = 'forged'; return 1", session), "read only")
    assert session == before


def test_sloppy_mutation_is_silently_ignored() -> None:
    script = (
        "session[99] = {}; session[1].data.toolName = 'x'; lookups.toolCalls.length = 0; config.k = 9; "
        "return session.length * 100 + lookups.toolCalls.length * 10 + (config.k === 2 ? 1 : 0)"
    )
    assert run_js(script, config={"k": 2}).value == 10 * 100 + 3 * 10 + 1


# --- resources -----------------------------------------------------------------------------------


def test_infinite_loop_is_stopped_by_its_time_budget() -> None:
    started = time.monotonic()
    _contained(run_js("while (true) {}", limits=JsLimits(timeout=0.5)), "timed out after 0.5 s")
    assert time.monotonic() - started < 5


def test_infinite_microtask_chain_is_stopped() -> None:
    script = "const f = () => Promise.resolve().then(f); f(); return 1"
    _contained(run_js(script, limits=JsLimits(timeout=0.5)), "timed out")


def test_heap_memory_bomb_is_stopped() -> None:
    # V8 collects again and again near its heap limit before it gives up: on a loaded machine
    # that outlasted FAST's 2 s (the CI of session 13). A long timeout leaves the heap limit as
    # the only thing that can stop it in time.
    limits = JsLimits(timeout=30.0, heap_mb=FAST.heap_mb)
    _contained(run_js("const a = []; for (;;) a.push(new Array(1e6).fill(1.5))", limits=limits), "ran out of memory")


def test_array_buffer_memory_bomb_is_stopped() -> None:
    # ArrayBuffers live outside the V8 heap: the address-space limit is what stops these.
    script = "const a = []; for (let i = 0; i < 16; i++) a.push(new Uint8Array(2 ** 30).fill(1)); return a.length"
    _contained(run_js(script), "Array buffer allocation failed")


def test_stdout_flood_has_no_stream_to_write_to() -> None:
    _contained(run_js("for (;;) console.log('x'.repeat(1 << 20))"), "console is not defined")


def test_stderr_flood_has_no_stream_to_write_to() -> None:
    _contained(run_js("for (;;) process.stderr.write('x'.repeat(1 << 20))"), "process is not defined")


def test_huge_message_is_an_error() -> None:
    _contained(run_js("return {value: 1, message: 'x'.repeat(1 << 24)}"), "the limit is 65536")


def test_huge_non_numeric_return_is_an_error() -> None:
    _contained(run_js("return 'x'.repeat(1 << 26)"), "returned a string")


def test_to_json_override_cannot_inflate_the_result() -> None:
    outcome = run_js("Object.prototype.toJSON = () => 'x'.repeat(1 << 24); return {value: 2}")
    assert outcome.value == 2 and outcome.error is None


# --- the contract -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ("return 1 / 0", "non-finite"),
        ("return NaN", "non-finite"),
        ("return {value: Infinity}", "non-finite"),
        ("return {value: '3'}", "a string"),
        ("return {}", "missing"),
        ("return undefined", "returned undefined"),
        ("return true", "a boolean"),
        ("return 10n", "a bigint"),
        ("return (async () => 1)()", "Promise"),
        ("throw new RangeError('bad input')", "threw RangeError: bad input"),
        ("throw 'plain'", "a thrown string"),
        ("return (", "does not compile"),
    ],
)
def test_invalid_results_are_errors(script: str, fragment: str) -> None:
    _contained(run_js(script, limits=FAST), fragment)
