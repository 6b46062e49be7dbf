"""What the sync and async clients share: where the server is, each route's request and typed response, the error
raised for an error answer, and when to try again.

Nothing here sends anything: a `Call` is a method, a path, a JSON body and the msgspec type the answer decodes to;
`Client` (sync.py) and `AsyncClient` (aio.py) send it with httpx and differ only in how they wait.
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Mapping
from typing import Any

import attrs
import msgspec

from spinfc.wire.decisions import DecisionRequest, DecisionResponse
from spinfc.wire.schemas import ModelList, PackList, ScoreRequest, ScoreResponse

DEFAULT_BASE_URL = "http://localhost:8000"
BASE_URL_VARIABLE = "SPINFC_BASE_URL"
API_KEY_VARIABLE = "SPINFC_API_KEY"


class SpinfcError(Exception):
    """An error answer from the server (OpenAI's envelope): the HTTP status, the stable `code`, the `message`
    (what was wrong and what to do), the `param` at fault (a JSON path) and the envelope's `type`.
    `retry_after` is the server's Retry-After in seconds, where it sent one."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None,
                 type: str | None = None, retry_after: float | None = None):
        super().__init__(f"{status} {code}: {message}" + (f" (at {param})" if param else ""))
        self.status, self.code, self.message, self.param = status, code, message, param
        self.type, self.retry_after = type, retry_after


@attrs.frozen
class Settings:
    """Where the server is and how hard to try: `base_url` (SPINFC_BASE_URL, default http://localhost:8000; a
    trailing /v1 is accepted, as OpenAI's SDKs write it), `api_key` (SPINFC_API_KEY; sent as a bearer token),
    `max_retries` tries again after a 429 (or a 503 warming_up), waiting the Retry-After the server sent, at most
    `max_wait` seconds each time."""

    base_url: str
    api_key: str | None
    timeout: float = 300.0
    max_retries: int = 5
    max_wait: float = 60.0

    @classmethod
    def resolve(cls, base_url: str | None, api_key: str | None, **options) -> "Settings":
        url = (base_url or os.environ.get(BASE_URL_VARIABLE) or DEFAULT_BASE_URL).rstrip("/")
        url = url.removesuffix("/v1")
        key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE) or None
        return cls(url, key, **options)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


@attrs.frozen
class Call:
    method: str
    path: str
    result: type
    body: bytes | None = None


def body_of(body: Any, fields: Mapping[str, Any], request_type: type) -> bytes:
    """The JSON of a request given as a dict, a request struct, or keyword fields (merged over either); checked
    against `request_type` here, so a misspelt field fails before anything is sent."""
    plain = {} if body is None else msgspec.to_builtins(body) if isinstance(body, msgspec.Struct) else dict(body)
    plain.update(fields)
    try:
        msgspec.convert(plain, request_type)
    except msgspec.ValidationError as error:
        raise ValueError(f"not a valid {request_type.__name__}: {error}") from None
    return msgspec.json.encode(plain)


def score_call(body: Any = None, **fields) -> Call:
    return Call("POST", "/v1/score", ScoreResponse, body_of(body, fields, ScoreRequest))


def decisions_call(body: Any = None, **fields) -> Call:
    return Call("POST", "/v1/decisions", DecisionResponse, body_of(body, fields, DecisionRequest))


PACKS = Call("GET", "/v1/packs", PackList)
MODELS = Call("GET", "/v1/models", ModelList)


class _Envelope(msgspec.Struct):
    error: dict[str, Any]


def decode(call: Call, status: int, headers: Mapping[str, str], content: bytes):
    """The typed answer of a 2xx; `SpinfcError` for anything else (the envelope's fields, or the raw text)."""
    if 200 <= status < 300:
        return msgspec.json.decode(content, type=call.result)
    try:
        error = msgspec.json.decode(content, type=_Envelope).error
    except msgspec.DecodeError:
        error = {"message": content.decode("utf-8", "replace")[:500] or f"HTTP {status}", "code": f"http_{status}"}
    raise SpinfcError(status, str(error.get("code") or f"http_{status}"), str(error.get("message", "")),
                      error.get("param"), error.get("type"), retry_after(headers))


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds: a number, or an HTTP date from now; None when absent or unreadable."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


RETRIED_503 = frozenset({"warming_up"})  # a drained or failed server is not waited for: send the work elsewhere


def wait_before_retry(settings: Settings, error: SpinfcError, attempt: int) -> float | None:
    """Seconds to wait before trying a call again, or None to give up (raise `error`). A 429 is tried again after
    its Retry-After (1 s without one), and a 503 `warming_up` likewise (5 s without one); at most `max_retries`
    times, each wait at most `max_wait`."""
    if attempt >= settings.max_retries:
        return None
    if error.status == 429:
        return min(settings.max_wait, 1.0 if error.retry_after is None else error.retry_after)
    if error.status == 503 and error.code in RETRIED_503:
        return min(settings.max_wait, 5.0 if error.retry_after is None else error.retry_after)
    return None
