"""Decodes that take turns on CUDA each hold a lane of fixed buffers (extract/fixed.py): a new decode takes a lane no
decode in flight holds, and the engine lets as many decode at once as there are lanes (the CPU, whose decodes own
their buffers, more). The lanes' numbers on the GPU are the acceptance run's `turns` (docs/acceptance.md)."""

from __future__ import annotations

import types

import pytest

from spinfc.runtime.extract import fixed
from spinfc.runtime.extract.scheduling import DECODES_AT_ONCE, decodes_at_once, free_lane


def decoding(lane: int):
    return types.SimpleNamespace(lane=lane)


def test_a_new_decode_takes_a_lane_nobody_holds():
    assert free_lane([]) == 0
    assert free_lane([decoding(0)]) == 1
    assert free_lane([decoding(1)]) == 0


def test_as_many_decodes_take_turns_as_there_are_lanes(monkeypatch):
    import spinfc.runtime.extract.scheduling as scheduling

    monkeypatch.setattr(scheduling, "is_recurrent", lambda model: False)
    assert decodes_at_once(object(), "cuda:0") == fixed.CUDA_LANES >= 2
    assert decodes_at_once(object(), "cpu") == DECODES_AT_ONCE
    monkeypatch.setattr(scheduling, "is_recurrent", lambda model: True)  # eager decodes own their buffers
    assert decodes_at_once(object(), "cuda:0") == DECODES_AT_ONCE


def test_a_lane_past_the_last_is_refused(monkeypatch):
    stack = types.SimpleNamespace(config=types.SimpleNamespace())
    monkeypatch.setattr(fixed, "stack_of", lambda model: (stack, None))
    like = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda"))
    with pytest.raises(ValueError, match="lane"):
        fixed.pool_storage(object(), 16, like, lane=fixed.CUDA_LANES)
