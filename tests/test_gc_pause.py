"""``mst._gc.paused_gc``: the collector paused for a large pass, left alone for a small one, and
resumed on exit (also on error) only when it was running before."""

from __future__ import annotations

import gc

import pytest

from mst._gc import SMALL_PASS, paused_gc


def test_a_large_pass_pauses_the_collector_and_resumes_it() -> None:
    assert gc.isenabled()
    with paused_gc(SMALL_PASS):
        assert not gc.isenabled()
        with paused_gc(SMALL_PASS * 10):  # nested: the outer pass resumes collection
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_small_pass_is_left_alone() -> None:
    with paused_gc(SMALL_PASS - 1):
        assert gc.isenabled()
    assert gc.isenabled()


def test_collection_resumes_after_an_error() -> None:
    with pytest.raises(RuntimeError), paused_gc(SMALL_PASS):
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_paused_collector_stays_paused() -> None:
    gc.disable()
    try:
        with paused_gc(SMALL_PASS):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
