"""How a request body is read: the app's `request_class`, so every route's `data` goes through one place, after
the token is checked (guards run first) and before any route code runs:

    size          over --max-body-bytes: 413 max_body_bytes_exceeded (Litestar stops reading at the limit, and
                  refuses a Content-Length over it before reading anything)
    media type    anything but application/json (or +json): 415 unsupported_media_type
    depth         nested deeper than 32 levels: 400 too_deeply_nested, found on the raw bytes (json_body.py)
    time          the whole body within BODY_TIMEOUT_S of the route asking for it: a client that announces more
                  than it sends is 408 body_timeout and its connection closed, not held open
    JSON          malformed or truncated: 400 invalid_json with line and column
    types         strictly the route's struct (no "5" read as 5): 400 unknown_field / missing_field / wrong_type /
                  invalid_value / empty_list, `param` the JSON path (the words of spinfc/frontend/mistakes.py)

The decoded struct is what the handler receives; Litestar's own (lenient) conversion passes it through unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Request
from litestar.types import Empty  # Litestar's "not read yet"

from spinfc.frontend.json_body import decode_body
from spinfc.server.errors import ApiError

JSON_TYPES = ("application/json",)
BODY_TIMEOUT_S = 30.0  # a 2 MB body over a slow link arrives well within this


def is_json(media_type: str) -> bool:
    return media_type in JSON_TYPES or (media_type.startswith("application/") and media_type.endswith("+json"))


class BodyRequest(Request):
    """A Litestar request whose JSON body is checked and decoded by `decode_body` into the route's `data` type."""

    async def body(self) -> bytes:
        """The whole body, within BODY_TIMEOUT_S (Litestar reads it here before `json`)."""
        try:
            return await asyncio.wait_for(super().body(), BODY_TIMEOUT_S)
        except TimeoutError:
            raise ApiError(408, "body_timeout", f"the body did not arrive within {BODY_TIMEOUT_S:g} s of the "
                           "request: send all the bytes its Content-Length announces",
                           headers={"Connection": "close"}) from None

    async def json(self) -> Any:
        data_field = getattr(self.route_handler, "parsed_data_field", None)
        if data_field is None:  # no body to read on this route
            return await super().json()
        if self._json is not Empty:
            return self._json
        media_type = self.content_type[0]
        if not is_json(media_type):
            sent = f"Content-Type {media_type}" if media_type else "no Content-Type"
            raise ApiError(415, "unsupported_media_type", f"the body was sent with {sent}: this server reads JSON "
                           "only; send the body as JSON with the header Content-Type: application/json")
        self._json = decode_body(await self.body(), data_field.annotation)
        return self._json

