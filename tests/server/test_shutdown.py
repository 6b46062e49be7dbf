"""A live server (uvicorn, real HTTP, smollm2-135m on the CPU, the model paused by `Pausable`): a client that hangs
up withdraws its request and frees its place; the shutdown deadline ends streams with a last `shutting_down` event
and answers waiting requests 503; a second signal answers them 503 at once and exits.

A paused pass holds the model's lock, so generation steps wait too: everything stays in flight until the test
resumes the model."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn

from spinfc.config import EngineSettings, ServerSettings, Settings
from spinfc.server.app import create_app
from spinfc.server.shutdown import GracefulServer

from .live import pausable_loader, wait_ready, wait_until

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Customer message: my parcel never arrived."}]
QUERY = {"id": "late", "template": "\n\nIs a delivery late?\nAnswer:<?>", "options": [" yes", " no"]}
SCORE = {"messages": MESSAGES, "scoring": {"queries": [QUERY]}}


def other(text: str) -> list[dict]:
    return [{"role": "user", "content": f"Customer message: {text}"}]


HANG_UPS = {  # route -> a body whose content differs from SCORE's (its own unit of work in the engine)
    "/v1/score": {"messages": other("the box was wet."), "scoring": {"queries": [QUERY]}},
    "/v1/decisions": {"state": "Customer message: where is my refund?",
                      "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}},
    "/v1/chat/completions": {"messages": other("I was charged twice."), "scoring": {"queries": [QUERY]}},
}


@contextlib.contextmanager
def graceful_server(shutdown_timeout: int) -> Iterator[tuple[httpx.Client, GracefulServer, threading.Thread, object,
                                                           object]]:
    """A live app under `GracefulServer`; yields the client, the server, its thread, the paused-able model and
    the service. The test ends the server itself (handle_exit, as a signal would)."""
    models: list = []
    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", token_budget=512, warmup="short"),
                        server=ServerSettings(queue=8, shutdown_timeout=shutdown_timeout))
    app = create_app(settings, load_model=pausable_loader(models))
    server = GracefulServer(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"),
                            app.state.service.shutdown)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=600, what="uvicorn to start")
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    client = httpx.Client(base_url=url, timeout=120)
    wait_ready(client)
    try:
        yield client, server, thread, models[0], app.state.service
    finally:
        models[0].resume()
        server.should_exit = server.force_exit = True
        thread.join(timeout=60)
        client.close()


def hang_up(url: str, path: str, body: dict, when) -> None:
    """Send `body` to `path` on a raw connection and close it once `when()` holds (the request is in flight)."""
    parts = urlsplit(str(url))
    data = json.dumps(body).encode()
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        wait_until(when, timeout=60, what=f"{path} to be in flight")


def test_a_ready_server_has_frozen_its_start_up_heap() -> None:
    """The model and the libraries' objects are out of the collector's scans once the server is ready (a full
    collection over them stopped every thread for ~200 ms on an H200's host)."""
    import gc

    gc.unfreeze()
    with graceful_server(shutdown_timeout=5):
        assert gc.get_freeze_count() > 10_000


def test_a_client_that_hangs_up_is_withdrawn_and_frees_its_place() -> None:
    with graceful_server(shutdown_timeout=30) as (client, _, _, model, service):
        engine = service.engine
        model.pause()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(client.post, "/v1/score", json=SCORE)  # its pass runs and waits, holding the model
            wait_until(lambda: model.waiting == 1, what="the first pass")
            passes = engine.stats.passes
            for path, body in HANG_UPS.items():
                hang_up(client.base_url, path, body, when=lambda: engine.stats.queued == 2)
                wait_until(lambda: engine.stats.queued == 1 and service.admission.active == 1,
                           what=f"{path}: the request withdrawn and its place freed")
            chat = {"messages": other("hello"), "max_tokens": 64}  # generation waits for the model's lock
            hang_up(client.base_url, "/v1/chat/completions", chat, when=lambda: service.admission.active == 2)
            wait_until(lambda: service.admission.active == 1, what="the generation's place freed")
            model.resume()
            assert held.result().status_code == 200
        time.sleep(1.0)
        assert engine.stats.passes == passes + 1  # only the held request's pass ran: the others were withdrawn
        assert engine.stats.queued == 0 and service.admission.active == 0
        assert client.post("/v1/score", json=HANG_UPS["/v1/score"]).status_code == 200


def read_stream(client: httpx.Client, body: dict, events: list, started: threading.Event) -> None:
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append((time.monotonic(), line.removeprefix("data: ")))
                started.set()


def test_the_shutdown_deadline_ends_streams_and_waiting_requests() -> None:
    with graceful_server(shutdown_timeout=1) as (client, server, thread, model, service):
        model.pause()
        events: list = []
        started = threading.Event()
        stream = {"messages": other("tell me a story"), "stream": True, "max_tokens": 256}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            held = pool.submit(client.post, "/v1/score", json=SCORE)
            wait_until(lambda: model.waiting == 1, what="the scoring pass")
            streaming = pool.submit(read_stream, client, stream, events, started)
            assert started.wait(timeout=60), "the stream's first event"
            signalled = time.monotonic()
            server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
            answer = held.result(timeout=30)
            streaming.result(timeout=30)
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "shutting_down"
        assert "--shutdown-timeout passed" in answer.json()["error"]["message"]
        at, last = events[-1]
        error = json.loads(last)["error"]
        assert error["code"] == "shutting_down" and error["type"] == "server_error"
        assert "[DONE]" not in [text for _, text in events]
        assert 0.9 <= at - signalled < 5, at - signalled
        assert service.shutdown.passed
        model.resume()  # the engine's thread can finish its pass, so the lifespan can close the engine
        thread.join(timeout=60)
        assert not thread.is_alive(), "the server did not stop after its deadline"


def test_a_second_signal_answers_what_is_in_flight_and_exits_without_waiting() -> None:
    with graceful_server(shutdown_timeout=600) as (client, server, thread, model, service):
        model.pause()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(client.post, "/v1/score", json=SCORE)
            wait_until(lambda: model.waiting == 1, what="the scoring pass")
            server.handle_exit(signal.SIGTERM, None)
            time.sleep(1.0)
            assert thread.is_alive() and not server.force_exit  # waiting for the request in flight
            stopped = time.monotonic()
            server.handle_exit(signal.SIGTERM, None)
            thread.join(timeout=10)
            assert not thread.is_alive() and time.monotonic() - stopped < 5
            answer = held.result(timeout=30)  # answered as the loop winds down, not dropped with a traceback
            assert answer.status_code == 503 and answer.json()["error"]["code"] == "shutting_down"
        model.resume()
        service.engine.close()  # the forced exit skipped the lifespan's close
        service.generator.close()
