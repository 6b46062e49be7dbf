"""`while_connected` (server/hangup.py): the work runs in the caller's task, started at once; a client that hangs
up cancels it (499), the shutdown deadline cancels it (503), and otherwise its result comes back."""

from __future__ import annotations

import asyncio

import pytest

from spinfc.server.errors import ApiError
from spinfc.server.hangup import while_connected


class Client:
    """The request's ASGI receive: the disconnect comes when `leave` is set."""

    def __init__(self) -> None:
        self.leave = asyncio.Event()

    async def receive(self) -> dict:
        await self.leave.wait()
        return {"type": "http.disconnect"}


class Deadline:
    def __init__(self) -> None:
        self.passed = asyncio.Event()
        self.begun_at = None

    async def deadline(self) -> None:
        await self.passed.wait()


class Service:
    def __init__(self) -> None:
        self.shutdown = Deadline()


def run(case):
    return asyncio.run(asyncio.wait_for(case(), 10))


def test_the_work_starts_in_the_callers_step_and_its_result_comes_back() -> None:
    async def case():
        steps = []

        async def work():
            steps.append("started")  # before the caller's task yields to any other
            await asyncio.sleep(0.01)
            return 7

        asyncio.get_running_loop().call_soon(steps.append, "other")  # another request's step, ready to run
        result = await while_connected(Client(), Service(), work())
        return result, steps, asyncio.current_task().cancelling()

    assert run(case) == (7, ["started", "other"], 0)


@pytest.mark.parametrize("ending, code", [("hang-up", 499), ("deadline", 503)])
def test_a_hang_up_or_the_deadline_cancels_the_work_and_answers(ending: str, code: int) -> None:
    async def case():
        client, service, unwound = Client(), Service(), []

        async def work():
            try:
                await asyncio.sleep(30)
            finally:
                unwound.append(True)  # the engine job withdrawn, the admission place freed

        (client.leave if ending == "hang-up" else service.shutdown.passed).set()
        with pytest.raises(ApiError) as raised:
            await while_connected(client, service, work())
        await asyncio.sleep(0)  # the caller's task carries on: not left cancelled
        return raised.value.status, unwound, asyncio.current_task().cancelling()

    assert run(case) == (code, [True], 0)


def test_a_cancel_from_outside_is_not_swallowed_before_shutdown() -> None:
    async def case():
        async def work():
            await asyncio.sleep(30)

        task = asyncio.ensure_future(while_connected(Client(), Service(), work()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return True

    assert run(case)
