"""HTTP framing on raw sockets against one live server run as `spinfc serve` runs it (`uvicorn_config`, issue 38):
a request with both Transfer-Encoding and Content-Length is 400 and its connection closed (RFC 9112 6.1); a client
that half-closes after its request still gets the answer; a body shorter than its Content-Length is 408 after
--body-timeout; a client that closes its socket mid-request is seen to leave."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn

from spinfc.config import EngineSettings, FeatureSettings, ServerSettings, Settings
from spinfc.server.app import create_app
from spinfc.server.cli import uvicorn_config

BODY_TIMEOUT = 1
SCORE = json.dumps({"messages": [{"role": "user", "content": "I want my money back."}],
                    "scoring": {"queries": [{"id": "refund", "template": "\n\nIs this a refund request?\nAnswer:<?>",
                                             "options": [" yes", " no"]}]}}).encode()


@pytest.fixture(scope="module")
def port():
    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", token_budget=512, warmup="none"),
                        server=ServerSettings(host="127.0.0.1", port=0, body_timeout=BODY_TIMEOUT, log_level="warning"),
                        features=FeatureSettings(extraction=False, generation=False))
    app = create_app(settings)
    server = uvicorn.Server(uvicorn_config(app, settings.server))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    while app.state.service.status != "ready":
        assert app.state.service.status != "failed" and time.monotonic() < deadline, app.state.service.error
        time.sleep(0.1)
    yield port
    server.should_exit = True
    thread.join(timeout=60)


def exchange(port: int, raw: bytes, half_close: bool = False, timeout: float = 30) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        started = time.monotonic()
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
        return reply, time.monotonic() - started


def final(reply: bytes) -> tuple[bytes, dict | None]:
    """The status line of the last response in `reply` (after any 100 Continue) and its JSON body."""
    while reply.startswith(b"HTTP/1.1 100"):
        reply = reply.partition(b"\r\n\r\n")[2]
    head, _, body = reply.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], json.loads(body) if body.strip().startswith(b"{") else None


def post(body: bytes, length: int | None = None, extra: bytes = b"") -> bytes:
    return (b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: " + str(len(body) if length is None else length).encode() + b"\r\n\r\n" + body)


def test_both_framings_are_400_and_the_connection_closes(port) -> None:
    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(SCORE), SCORE)
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"  # a second request on the same connection
    raw = post(chunk, length=len(chunk), extra=b"Transfer-Encoding: chunked\r\n") + smuggled
    reply, _ = exchange(port, raw)  # returns only because the server closes the connection
    status, body = final(reply)
    assert status.startswith(b"HTTP/1.1 400"), reply
    assert body["error"]["code"] == "invalid_http" and "Transfer-Encoding and Content-Length" in body["error"]["message"]
    assert reply.count(b"HTTP/1.1 ") == 1, reply  # the second request was not served


@pytest.mark.parametrize("raw", [b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", post(SCORE)], ids=["healthz", "score"])
def test_a_half_closed_client_gets_its_answer(port, raw) -> None:
    reply, _ = exchange(port, raw, half_close=True)
    status, body = final(reply)
    assert status == b"HTTP/1.1 200 OK", reply
    if raw.startswith(b"POST"):
        options = body["results"][0]["combinations"][0]["options"]
        assert {o["text"] for o in options} == {" yes", " no"}, body


@pytest.mark.parametrize("raw, status, code", [
    (post(b"{not json"), b"400", "invalid_json"),
    (post(SCORE).replace(b"application/json", b"text/plain"), b"415", "unsupported_media_type"),
], ids=["invalid-json", "text-plain"])
def test_a_half_closed_bad_body_is_answered_with_no_interim_response(port, raw, status, code) -> None:
    """Issue 47 item 8: the 400 and 415 came after an unsolicited `100 Continue` (sent to every half-closed request)."""
    reply, _ = exchange(port, raw, half_close=True)
    assert reply.startswith(b"HTTP/1.1 " + status), reply
    assert final(reply)[1]["error"]["code"] == code


def test_a_half_closed_content_length_over_the_limit_is_413(port) -> None:
    """Issue 47 item 8: with the sending side shut after the headers the connection closed with no byte; the 413
    needs no byte of the body."""
    reply, _ = exchange(port, post(b"", length=99999999999), half_close=True)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    assert final(reply)[1]["error"]["code"] == "max_body_bytes_exceeded"


def test_a_half_closed_body_shorter_than_its_content_length_closes_at_once(port) -> None:
    """The rest of the body can never come: the connection closes, with no 408 after --body-timeout."""
    reply, took = exchange(port, post(SCORE, length=len(SCORE) + 50), half_close=True)
    assert reply == b"" and took < BODY_TIMEOUT, (reply, took)


def test_a_half_closed_http10_client_gets_its_answer_without_an_interim_response(port) -> None:
    reply, _ = exchange(port, b"GET /healthz HTTP/1.0\r\n\r\n", half_close=True)
    assert reply.startswith(b"HTTP/1.1 200 OK"), reply


def test_a_body_shorter_than_its_content_length_is_408_after_the_body_timeout(port) -> None:
    reply, took = exchange(port, post(SCORE, length=len(SCORE) + 50))
    status, body = final(reply)
    assert status.startswith(b"HTTP/1.1 408"), reply
    assert body["error"]["code"] == "request_timeout" and "--body-timeout" in body["error"]["message"]
    assert BODY_TIMEOUT <= took < BODY_TIMEOUT + 5, took


def test_a_body_that_keeps_coming_is_not_timed_out(port) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        raw = post(SCORE)
        head, body = raw[:len(raw) - len(SCORE)], SCORE
        sock.sendall(head)
        for start in range(0, len(body), len(body) // 3 + 1):  # each part within the timeout, all past it
            time.sleep(BODY_TIMEOUT * 0.6)
            sock.sendall(body[start:start + len(body) // 3 + 1])
        sock.shutdown(socket.SHUT_WR)
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    assert final(reply)[0] == b"HTTP/1.1 200 OK", reply


def test_the_connection_stays_usable_for_a_well_framed_request(port) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for _ in range(2):  # keep-alive still works
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = sock.recv(65536)
            while b"}" not in reply:  # the JSON body, whole
                reply += sock.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"}"), reply


def test_a_client_that_closes_its_socket_mid_request_is_seen_to_leave(port) -> None:
    long = json.dumps({"messages": [{"role": "user", "content": "I want my money back. " * 40}],
                       "scoring": {"queries": [{"id": "q", "template": "\n\nIs it about {x}?\nAnswer:<?>",
                                                "options": [" yes", " no"],
                                                "placeholders": {"x": [f"topic {i}" for i in range(60)]}}]}})
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(post(long.encode()))
        time.sleep(0.3)  # the request is running
    deadline = time.monotonic() + 30
    while b'status="499"' not in (metrics := exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                                                            b"Connection: close\r\n\r\n")[0]):
        assert time.monotonic() < deadline, metrics.decode()[-3000:]
        time.sleep(0.2)
