"""HTTP/1.1 framing, where uvicorn's h11 protocol leaves it to the server (docs/api.md, "HTTP framing").
`framed_protocol(body_timeout)` is uvicorn's h11 protocol with four answers of its own, for `spinfc serve` and the
router:

    not HTTP            a request h11 cannot parse (a broken request line, bad headers, a malformed chunk): 400
                        `invalid_http` in OpenAI's envelope (uvicorn answers plain text), and the connection closed
    two framings        a request with both Transfer-Encoding and Content-Length: 400 `invalid_http` and the
                        connection closed (RFC 9112 6.1: behind a proxy that reads the other header, a second request
                        smuggled in the body would be served)
    a body that stalls  no byte of a request's body for `body_timeout` seconds (a Content-Length larger than what
                        is sent): 408 `request_timeout` and the connection closed; the app sees the client leave
    a half-close        a client that shuts down its sending side after a whole request (shutdown(SHUT_WR)) still
                        gets its answer, and the connection closes after it. A client that closes its socket
                        sends the same FIN, so once the app waits on a half-closed HTTP/1.1 request's work (it
                        asks for the next ASGI message after the whole body: the disconnect, server/hangup.py) the
                        request is sent `100 Continue` (which a client must accept before any answer, RFC 9110
                        15.2): a closed socket answers it with a reset, which the connection checks for every
                        PROBE_S and takes as the client leaving (its work withdrawn). An answer given without
                        waiting (a 400 or 415 on the body) comes alone, with no interim response before it
    a half-cut body     a client that shuts down its sending side before its whole body: an answer the app gives
                        without the body (413 on a Content-Length over --max-body-bytes, 401, 415) is sent; an app
                        that asks for the body finds the client gone (the rest can never come)
"""

from __future__ import annotations

import json
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol

PROBE_S = 0.1  # how often a half-closed connection is checked for the reset of a client that is gone


def _response(status: bytes, code: str, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code,
                                 "param": None}}).encode()
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)


RESPONSE = _response(b"400 Bad Request", "invalid_http",
                     "the request is not valid HTTP/1.1 (its request line, headers or chunked body could not be "
                     "parsed): send a well-formed request, e.g. with an HTTP client library")
TWO_FRAMINGS = _response(b"400 Bad Request", "invalid_http",
                         "the request has both Transfer-Encoding and Content-Length, so its end is ambiguous "
                         "(RFC 9112 6.1): send one of them; the connection is closed")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def timed_out(seconds: int) -> bytes:
    return _response(b"408 Request Timeout", "request_timeout",
                     f"no byte of the request's body arrived for {seconds} s (its Content-Length is more than was "
                     "sent?): send the whole body, or raise --body-timeout; the connection is closed")


def framed_protocol(body_timeout: int = 5) -> type:
    """uvicorn's h11 HTTP protocol with the answers above; `body_timeout`: seconds a body may stall."""
    class FramedProtocol(H11Protocol):
        body_timer = None  # asyncio.TimerHandle: armed while a request's body is awaited
        probe = None  # asyncio.TimerHandle: armed while a half-closed request's work is awaited
        half_closed = False  # the client's FIN came
        body_read = False  # the app has received the cycle's whole body
        waiting = None  # what the app's receive() awaits now: "body", "disconnect" or None

        def send_400_response(self, msg: str) -> None:
            self._refuse(RESPONSE)

        def _refuse(self, response: bytes) -> None:
            self._stop_timers()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:  # the app, if it runs, sees the client gone
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.write(response)
            self.transport.close()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            cycle = self.cycle
            if cycle is not None and cycle is not before:
                self._watch_receive(cycle)
            if cycle is None or self.transport.is_closing():
                return
            if not cycle.response_started and _two_framings(self.headers):
                self._refuse(TWO_FRAMINGS)
            elif cycle.more_body and not cycle.response_complete:
                self._arm_body_timer()  # a byte of the body came (or the request began): the clock starts again
            else:
                self._cancel("body_timer")

        def _arm_body_timer(self) -> None:
            self._cancel("body_timer")
            self.body_timer = self.loop.call_later(body_timeout, self._body_stalled)

        def _body_stalled(self) -> None:
            cycle = self.cycle
            if cycle is None or not cycle.more_body or cycle.response_started or self.transport.is_closing():
                return
            if self.flow.read_paused:  # the app has not read what came: the client is not the one waiting
                self._arm_body_timer()
                return
            self.logger.info("a request's body stalled for %s s (--body-timeout): 408", body_timeout)
            self._refuse(timed_out(body_timeout))

        def _watch_receive(self, cycle) -> None:
            """The new cycle's `receive`, wrapped to know what the app waits for. Set before its task first runs
            (uvicorn creates the task in this same call; asyncio starts it at the loop's next turn)."""
            receive = cycle.receive
            self.body_read, self.waiting = False, None

            async def watched_receive():
                if self.body_read:
                    self.waiting = "disconnect"
                    self._probe()
                elif self.half_closed and cycle.more_body:
                    self.transport.abort()  # the rest of the body can never come: the app sees the client gone
                else:
                    self.waiting = "body"
                try:
                    message = await receive()
                finally:
                    self.waiting = None
                if message["type"] == "http.request" and not message.get("more_body", False):
                    self.body_read = True
                return message

            cycle.receive = watched_receive

        def eof_received(self) -> bool | None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete or (cycle.more_body and self.waiting == "body"):
                return None  # nothing to answer: asyncio closes the connection (the app sees it go)
            self.half_closed = True
            cycle.keep_alive = False  # answer, then close
            if self.waiting == "disconnect":
                self._probe()
            return True  # keep the sending side open for the answer

        def _probe(self) -> None:
            """On a half-closed HTTP/1.1 request whose work the app awaits: `100 Continue`, then a check for the
            reset every PROBE_S."""
            cycle = self.cycle
            if (self.half_closed and self.probe is None and self.scope["http_version"] == "1.1"
                    and not cycle.response_started and not self.transport.is_closing()):
                self.transport.write(CONTINUE)
                self.probe = self.loop.call_later(PROBE_S, self._check_gone)

        def _check_gone(self) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_started or self.transport.is_closing():
                return
            sock = self.transport.get_extra_info("socket")
            try:
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) if sock is not None else 0
            except OSError:
                error = 1
            if error:  # the reset of a closed socket: the client is gone
                self.transport.abort()
                return
            self.probe = self.loop.call_later(PROBE_S, self._check_gone)

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def _stop_timers(self) -> None:
            self._cancel("body_timer")
            self._cancel("probe")

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timers()
            super().connection_lost(exc)

    def _two_framings(headers: list[tuple[bytes, bytes]]) -> bool:
        names = {name for name, _ in headers}
        return b"transfer-encoding" in names and b"content-length" in names

    return FramedProtocol
