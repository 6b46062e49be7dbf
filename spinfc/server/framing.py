"""HTTP framing errors in the envelope: a request uvicorn cannot parse as HTTP (a broken request line, bad
headers, a malformed chunk) never reaches the app, and uvicorn answers it with plain text. `envelope_protocol()`
is uvicorn's HTTP protocol with that answer in OpenAI's envelope (`400 invalid_http`), for `spinfc serve`."""

from __future__ import annotations

import json

BODY = json.dumps({"error": {
    "message": "the request is not valid HTTP/1.1 (its request line, headers or chunked body could not be parsed): "
               "send a well-formed request, e.g. with an HTTP client library",
    "type": "invalid_request_error", "code": "invalid_http", "param": None}}).encode()
RESPONSE = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(BODY)).encode() + b"\r\nconnection: close\r\n\r\n" + BODY)


def envelope_protocol() -> type:
    """uvicorn's "auto" HTTP protocol (httptools when installed, else h11) answering framing errors as JSON."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class EnvelopeProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def send_400_response(self, msg: str) -> None:
            self.transport.write(RESPONSE)  # the connection closes after it: the protocol's state does not matter
            self.transport.close()

    return EnvelopeProtocol
