"""How a batch of texts reaches the engine: in this process (engine_transport.py) or a running `spinfc serve`
(http_transport.py). Both take the same question set and give the same numbers on the same device and fingerprint.

    transport = ...; await transport.start()      load the model / check the server; sets model and fingerprint
    await transport.score(["text 1", "text 2"])   one ContentResult per text, in order; Rejected for the batch
    await transport.score([RowContent("text", (image,))])   a row with media (spinfc/bulk/media.py): after its text
    await transport.close()
"""

from __future__ import annotations

from typing import Protocol

import attrs

from spinfc.wire.results import QueryResult


@attrs.frozen
class RowContent:
    """A row's content when it has media: its text, then its media (`spinfc.media.MediaSource`, read), in order."""

    text: str
    media: tuple = ()


def text_and_media(content: "str | RowContent") -> tuple[str, tuple]:
    return (content, ()) if isinstance(content, str) else (content.text, content.media)


@attrs.frozen
class ContentResult:
    own: list[QueryResult]  # the --queries queries, in order
    packs: list  # one spinfc.wire.schemas.PackResult per --pack, in order
    error: tuple[str, str] | None = None  # (code, message) of a content the server refused alone (no results)


class Transport(Protocol):
    model: str  # the served model name
    fingerprint: str  # the system_fingerprint of every score this transport returns

    async def start(self) -> None: ...

    async def score(self, texts: list[str | RowContent]) -> list[ContentResult]:
        """Score every question of the question set on each text (and its media); raise `Rejected` when the engine
        or the server refuses the batch (the caller then scores each text alone to find the one at fault)."""
        ...

    async def close(self) -> None: ...
