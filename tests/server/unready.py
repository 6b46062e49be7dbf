"""An app for boundary tests, with no model: `ready_client(settings)` starts it, lets the model load fail at once,
then marks the service ready with an `Unreachable` engine. Every check before the engine runs as in the real
server; a request that gets as far as the engine is a 500, which boundary tests never accept."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace

from litestar.testing import TestClient

from spinfc.config import Settings
from spinfc.server.app import create_app

LONGEST_TOKEN = 31  # Gemma 3's longest vocabulary entry, in characters (what the real server reads at start)


class Unreachable:
    """Stands for the engine: it has a model name (the frontend names the program's model) and no codes (a
    language model: what the routes read before a request is compiled), takes the
    announcement of a scoring request (`Intake.expect`, before its body is read) and runs the server's frontend
    and checks handed to `compile_and_score` (the engine runs them on its compile thread, before compiling); a
    request they pass, and any other use of the engine, fails with a 500."""

    model = SimpleNamespace(name="gemma3-270m")
    codes = ()  # what the model's head reads: the vocabulary (a decision model's codes would be listed)
    intake = SimpleNamespace(expect=lambda: None, withdraw=lambda handle: None)

    async def compile_and_score(self, program, check=None):
        if callable(program):
            program()  # the frontend and its checks: a hostile body must be refused here
        raise AssertionError("a hostile request passed the frontend's checks and reached the compile")

    def __getattr__(self, name):
        raise AssertionError(f"a hostile request reached the engine (engine.{name})")


def no_model(name, dtype, device):
    raise FileNotFoundError(f"no weights for {name} (this test needs none)")


@contextlib.contextmanager
def ready_client(settings: Settings | None = None) -> Iterator[TestClient]:
    app = create_app(settings or Settings(), load_model=no_model)
    with TestClient(app) as client:
        service = app.state.service
        deadline = time.monotonic() + 30
        while service.status != "failed":  # the loader fails at once; then the service is made ready by hand
            assert time.monotonic() < deadline
            time.sleep(0.01)
        service.status, service.engine, service.longest_token = "ready", Unreachable(), LONGEST_TOKEN
        try:
            yield client
        finally:
            service.engine = None  # nothing to close
