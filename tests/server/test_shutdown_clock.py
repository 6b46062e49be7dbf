"""The shutdown clock alone (no model): the deadline passes `timeout_s` after `begin()`, from any thread, once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from spinfc.server.shutdown import Shutdown


def test_the_deadline_passes_after_the_timeout_begun_from_another_thread():
    clock = Shutdown(0.3)

    async def main() -> float:
        clock.bind(asyncio.get_running_loop())
        assert not clock.passed
        started = time.monotonic()
        threading.Thread(target=clock.begin).start()  # as a signal handler would, off the loop
        await asyncio.wait_for(clock.deadline(), timeout=5)
        return time.monotonic() - started

    assert 0.25 <= asyncio.run(main()) < 3 and clock.passed
    begun = clock.begun_at
    clock.begin()  # a second begin changes nothing
    assert clock.begun_at == begun


def test_an_app_served_again_waits_on_its_new_loop():
    clock = Shutdown(30)

    async def wait_briefly() -> None:
        clock.bind(asyncio.get_running_loop())
        with pytest.raises(asyncio.TimeoutError):  # not "bound to a different event loop"
            await asyncio.wait_for(clock.deadline(), timeout=0.05)

    asyncio.run(wait_briefly())
    asyncio.run(wait_briefly())
