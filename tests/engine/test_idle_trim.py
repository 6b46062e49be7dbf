"""The engine hands the C heap's free pages back once idle (schedule/allocator.py): the queues' idle wait calls
`on_idle` after `idle_seconds` with nothing arrived, once, then waits on; a timed wait (a pass gathering, a flight
being collected) never calls it, nor does an idle wait that something ends in time."""

from __future__ import annotations

import threading
import time

from spinfc.runtime.schedule.queues import Queues
from spinfc.runtime.schedule.stats import EngineStats


def test_an_idle_wait_trims_once_then_waits_on():
    calls = []
    queues = Queues(EngineStats(), on_idle=lambda: calls.append(time.perf_counter()), idle_seconds=0.05)
    threading.Timer(0.4, queues.inbox.put, args=(None,)).start()  # close()'s mark, later
    began = time.perf_counter()
    queues._wait(None)
    assert queues.closed and len(calls) == 1 and 0.05 <= calls[0] - began < 0.4


def test_timed_waits_and_arrivals_in_time_do_not_trim():
    calls = []
    queues = Queues(EngineStats(), on_idle=lambda: calls.append(1), idle_seconds=0.5)
    queues._wait(0.01)
    threading.Timer(0.05, queues.inbox.put, args=(None,)).start()
    queues._wait(None)
    assert queues.closed and calls == []

