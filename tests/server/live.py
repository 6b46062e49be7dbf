"""A live server for tests: the app under uvicorn on a free local port, in a thread; and a pause for the model.

`Pausable` wraps the real model: while paused, a forward pass waits before it runs (the scores are the real
model's). It lets a test hold requests in flight for as long as it needs, so overload and drain are tested
deterministically, whatever the speed of the machine.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import uvicorn

from packaged import load_shared


class Pausable:
    def __init__(self, model) -> None:
        self.model = model  # the stack (Generator and others look for `.model`)
        self.running = threading.Event()
        self.running.set()
        self.waiting = 0  # passes waiting for resume()

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward(self, launch):
        self.waiting += 1
        try:
            if not self.running.wait(timeout=300):
                raise TimeoutError("the test never resumed the model")
        finally:
            self.waiting -= 1
        return self.model.forward(launch)

    def pause(self) -> None:
        self.running.clear()

    def resume(self) -> None:
        self.running.set()


def pausable_loader(holder: list):
    """A `load_model` for create_app that takes the real model (a packaged one shared by the session, tests/packaged.py),
    wraps it in `Pausable` and appends it to `holder`."""
    def load(name, dtype, device):
        model = Pausable(load_shared(name, dtype, device))
        holder.append(model)
        return model
    return load


@contextlib.contextmanager
def live_server(app, timeout: float = 600, ready: bool = True) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (a free port) until the block ends; yields the base URL once /readyz is 200 (or,
    with `ready` false, once it listens: a server whose model does not load)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        while ready and (answer := httpx.get(f"{url}/readyz", timeout=30)).status_code != 200:
            assert '"model_failed"' not in answer.text, answer.text  # a model that failed to load never will
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def wait_until(condition, timeout: float = 120, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def wait_ready(client, timeout: float = 600, interval: float = 0.2) -> None:
    """Poll /readyz through a test client until it answers 200; fail with its last answer after `timeout` s."""
    deadline = time.monotonic() + timeout
    while (answer := client.get("/readyz")).status_code != 200:
        assert '"model_failed"' not in answer.text, answer.text  # a model that failed to load never will
        assert time.monotonic() < deadline, answer.json()
        time.sleep(interval)
