"""A running `spinfc serve` as the engine: each batch is one POST /v1/score with `inputs`, the question set's
`scoring.queries` and `packs`, as the in-process transport builds it, so the numbers are the same.

429 and 503 are retried after the server's Retry-After (each wait capped at 60 s) for as long as `patience`
allows (default an hour a request): a 429 is the server's admission at work, and a bulk job's requests wait their
turn (on a CPU server one 32-row request is over the default bound of four passes of queued tokens by itself, so
with --in-flight 4 a request waits until the work queued before it drops under the bound). A 400, 413 or 415 (a
file that is no image, or not the type it says) is the batch's fault (Rejected: the runner splits the batch to find
the rows at fault); anything else stops the job (BulkError): what was written stays, and --resume continues once
the server is back. A row's media (read by bulk/media.py) are sent inline as content parts after its text.
"""

from __future__ import annotations

import asyncio
import base64
import time

import httpx
import msgspec

from spinfc.bulk.errors import BulkError, Rejected
from spinfc.bulk.questions import QuestionSet
from spinfc.bulk.transport import ContentResult, RowContent, text_and_media
from spinfc.client.media import data_url
from spinfc.wire.results import QueryResult
from spinfc.wire.schemas import PackResult


class HttpTransport:
    def __init__(self, questions: QuestionSet, url: str, *, token: str | None = None, patience: float = 3600.0,
                 timeout: float = 600.0, http: httpx.AsyncBaseTransport | None = None):
        self.questions, self.url, self.patience = questions, url.rstrip("/"), patience
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=http)
        self.model = questions.model
        self.fingerprint = ""

    async def start(self) -> None:
        """Check the server serves the model and enables every pack (same version), then score one short text to
        learn the fingerprint (and to have the server check the questions before any work is done)."""
        packs = (await self._get("/v1/packs")).get("data", [])
        served = {p["id"]: p["version"] for p in packs}
        for pack in self.questions.packs:
            if pack.id not in served:
                raise BulkError(f"the server at {self.url} does not enable pack {pack.id!r} (it enables "
                                f"{', '.join(served) or 'none'}): start it with --packs FOLDER holding the pack")
            if served[pack.id] != pack.version:
                raise BulkError(f"the server at {self.url} enables pack {pack.id!r} version {served[pack.id]}, not "
                                f"{pack.version} as given here: use the same pack on both sides")
        try:
            await self.score(["Hello."])
        except Rejected as error:
            raise BulkError(f"the server at {self.url} refuses these questions: {error.code}: "
                            f"{error.message}") from None

    async def score(self, texts: list[str | RowContent]) -> list[ContentResult]:
        body: dict = {"inputs": [{"messages": [{"role": "user", "content": _content(item)}]} for item in texts]}
        if self.questions.queries:
            body["scoring"] = {"queries": list(self.questions.queries)}
        if self.questions.packs:
            body["packs"] = [{"id": pack.id} for pack in self.questions.packs]
        answer = await self._post("/v1/score", body)
        self.model, self.fingerprint = answer["model"], answer["system_fingerprint"]
        return [ContentResult([], [], error=(item["error"]["code"], item["error"]["message"])) if "error" in item
                else ContentResult([_query(r) for r in item["results"]], [_pack(p) for p in item.get("packs", [])])
                for item in answer["inputs"]]

    async def close(self) -> None:
        await self.client.aclose()

    async def _get(self, route: str) -> dict:
        try:
            response = await self.client.get(route)
        except httpx.HTTPError as error:
            raise BulkError(f"the server at {self.url} does not answer ({type(error).__name__}: {error}): start "
                            "`spinfc serve`, or check --server") from None
        if response.status_code != 200:
            raise BulkError(f"GET {self.url}{route}: {response.status_code} {response.text[:300]}")
        return response.json()

    async def _post(self, route: str, body: dict) -> dict:
        began, attempt = time.monotonic(), 0
        while True:
            try:
                response = await self.client.post(route, json=body)
            except httpx.HTTPError as error:
                raise BulkError(f"POST {self.url}{route} failed ({type(error).__name__}: {error}); what was written "
                                "is kept: run again with --resume") from None
            if response.status_code == 200:
                return response.json()
            error = _error(response)
            if response.status_code in (429, 503):
                wait = _retry_after(response, attempt)
                if time.monotonic() + wait - began <= self.patience:
                    attempt += 1
                    await asyncio.sleep(wait)
                    continue
                raise BulkError(f"POST {self.url}{route}: {response.status_code} {error.get('code')}: "
                                f"{error.get('message', response.text[:300])}; the server stayed busy for "
                                f"{time.monotonic() - began:.0f} s ({attempt + 1} tries): what was written is kept, "
                                "run again with --resume")
            if response.status_code in (400, 413, 415):  # a content over a limit, a batch over --max-body-bytes
                raise Rejected(error.get("code") or "invalid_request", error.get("message", response.text[:300]))
            raise BulkError(f"POST {self.url}{route}: {response.status_code} {error.get('code')}: "
                            f"{error.get('message', response.text[:300])}; run again with --resume when it is fixed")


def _content(item: str | RowContent) -> str | list[dict]:
    """A row's message content: its text, or its text and its media as content parts (the files inline)."""
    text, media = text_and_media(item)
    if not media:
        return text
    return [{"type": "text", "text": text}, *(_part(source) for source in media)]


def _part(source) -> dict:
    if source.kind == "image":
        return {"type": "image_url", "image_url": {"url": data_url(source.data, source.mime)}}
    if source.kind == "audio":
        return {"type": "input_audio", "input_audio": {"data": base64.b64encode(source.data).decode("ascii"),
                                                       "format": source.mime.removeprefix("audio/")}}
    if source.frames:
        return {"type": "video", "video": [data_url(frame.data, frame.mime) for frame in source.frames]}
    return {"type": "video_url", "video_url": {"url": data_url(source.data, source.mime)}}


def _error(response: httpx.Response) -> dict:
    try:
        return response.json().get("error") or {}
    except ValueError:
        return {}


def _retry_after(response: httpx.Response, attempt: int) -> float:
    """The server's Retry-After in seconds (at most 60); without one, 0.5 s doubling per attempt, capped at 30."""
    try:
        return min(60.0, max(0.0, float(response.headers["Retry-After"])))
    except (KeyError, ValueError):
        return min(30.0, 0.5 * 2**attempt)


def _query(item: dict) -> QueryResult:
    return msgspec.convert(item, QueryResult)


def _pack(item: dict):
    return msgspec.convert(item, PackResult)
