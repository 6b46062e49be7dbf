"""`AsyncClient`: the same API as `Client` (sync.py) for asyncio code; every method is a coroutine.

    async with AsyncClient() as client:
        answer = await client.score(messages=[...], scoring={...})
        batch = await client.score_many(texts, scoring={...}, concurrency=8)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from spinfc.client import batches
from spinfc.client.calls import (
    MODELS, PACKS, Call, Settings, SpinfcError, decisions_call, decode, score_call, wait_before_retry,
)
from spinfc.wire.decisions import DecisionResponse
from spinfc.wire.schemas import ModelList, PackList, ScoreResponse


class AsyncClient:
    """An asyncio client of one spinfc server. Close it (`await client.aclose()`, or `async with`)."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 300.0,
                 max_retries: int = 5, max_wait: float = 60.0, http: httpx.AsyncClient | None = None):
        self.settings = Settings.resolve(base_url, api_key, timeout=timeout, max_retries=max_retries,
                                         max_wait=max_wait)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._limits: dict[str, int] | None = None

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def score(self, body: Any = None, /, **fields) -> ScoreResponse:
        return await self.send(score_call(body, **fields))

    async def decisions(self, body: Any = None, /, **fields) -> DecisionResponse:
        return await self.send(decisions_call(body, **fields))

    async def packs(self) -> PackList:
        return await self.send(PACKS)

    async def models(self) -> ModelList:
        return await self.send(MODELS)

    async def ready(self) -> bool:
        try:
            return (await self._http.get(self.settings.base_url + "/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    async def wait_ready(self, timeout: float = 600.0, every: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while not await self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.settings.base_url}/readyz did not answer 200 within {timeout:g} s")
            await asyncio.sleep(every)

    async def limits(self) -> dict[str, int]:
        if self._limits is None:
            self._limits = batches.server_limits(await self.models())
        return self._limits

    async def score_many(self, contents: Sequence[batches.Content], scoring: Any = None, *,
                         packs: Sequence[str] | None = None, model: str | None = None, concurrency: int = 4,
                         max_inputs: int = batches.DEFAULT_MAX_INPUTS) -> batches.Batch:
        """As `Client.score_many`: requests sized by the server's limits, `concurrency` in flight, input order."""
        inputs = [batches.as_input(content) for content in contents]
        body = batches.job_body(scoring, packs, model)
        chunks = batches.plan_chunks(inputs, body, await self.limits(), max_inputs)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def run(chunk: range) -> list[tuple[range, ScoreResponse]]:
            async with gate:
                try:
                    return [(chunk, await self.score({**body, "inputs": inputs[chunk.start:chunk.stop]}))]
                except SpinfcError as error:
                    if len(chunk) < 2 or not batches.split_on(error):
                        raise
            left, right = batches.halves(chunk)
            return await run(left) + await run(right)

        parts = await asyncio.gather(*(run(chunk) for chunk in chunks))
        return batches.merge([answer for part in parts for answer in part])

    async def send(self, call: Call):
        attempt = 0
        while True:
            response = await self._http.request(call.method, self.settings.base_url + call.path, content=call.body,
                                                headers=self.settings.headers())
            try:
                return decode(call, response.status_code, response.headers, response.content)
            except SpinfcError as error:
                wait = wait_before_retry(self.settings, error, attempt)
                if wait is None:
                    raise
            await asyncio.sleep(wait)
            attempt += 1
