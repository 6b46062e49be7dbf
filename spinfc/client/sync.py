"""`Client`: spinfc's HTTP API from blocking code (httpx), with typed answers.

    client = Client()                                   # SPINFC_BASE_URL, SPINFC_API_KEY, else localhost:8000
    answer = client.score(messages=[...], scoring={...})  -> ScoreResponse
    batch = client.score_many(texts, scoring={...})     -> Batch (many requests, in input order)
"""

from __future__ import annotations

import concurrent.futures
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


class Client:
    """A blocking client of one spinfc server; safe to share between threads. Close it (or use `with`) to free
    its connections. See `Settings` for `base_url`, `api_key`, `max_retries` and `max_wait`."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 300.0,
                 max_retries: int = 5, max_wait: float = 60.0, http: httpx.Client | None = None):
        self.settings = Settings.resolve(base_url, api_key, timeout=timeout, max_retries=max_retries,
                                         max_wait=max_wait)
        self._http = http or httpx.Client(timeout=timeout)
        self._limits: dict[str, int] | None = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ---- the routes -----------------------------------------------------------------------------------------

    def score(self, body: Any = None, /, **fields) -> ScoreResponse:
        """POST /v1/score with `body` (a dict or `ScoreRequest`) and/or its fields as keywords."""
        return self.send(score_call(body, **fields))

    def decisions(self, body: Any = None, /, **fields) -> DecisionResponse:
        """POST /v1/decisions with `body` (a dict or `DecisionRequest`) and/or its fields as keywords."""
        return self.send(decisions_call(body, **fields))

    def packs(self) -> PackList:
        """GET /v1/packs: the packs the server enabled, and those it skipped with why."""
        return self.send(PACKS)

    def models(self) -> ModelList:
        """GET /v1/models: the served model, whether it is ready, its features and limits."""
        return self.send(MODELS)

    def ready(self) -> bool:
        """Whether GET /readyz answers 200 (the model is loaded and warm, the server not draining)."""
        try:
            return self._http.get(self.settings.base_url + "/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def wait_ready(self, timeout: float = 600.0, every: float = 1.0) -> None:
        """Poll /readyz until it answers 200; TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.settings.base_url}/readyz did not answer 200 within {timeout:g} s")
            time.sleep(every)

    # ---- a large job ----------------------------------------------------------------------------------------

    def score_many(self, contents: Sequence[batches.Content], scoring: Any = None, *,
                   packs: Sequence[str] | None = None, model: str | None = None, concurrency: int = 4,
                   max_inputs: int = batches.DEFAULT_MAX_INPUTS) -> batches.Batch:
        """Score every content with the same questions, in requests sized by the server's limits (GET /v1/models,
        read once), at most `concurrency` at a time. Results come back in input order; the first error that is
        not "too large" (those are split and sent again) is raised."""
        inputs = [batches.as_input(content) for content in contents]
        body = batches.job_body(scoring, packs, model)
        chunks = batches.plan_chunks(inputs, body, self.limits(), max_inputs)
        with concurrent.futures.ThreadPoolExecutor(max(1, concurrency)) as pool:
            parts = list(pool.map(lambda chunk: self._score_chunk(inputs, body, chunk), chunks))
        return batches.merge([answer for part in parts for answer in part])

    def limits(self) -> dict[str, int]:
        """The served model's limits (GET /v1/models), read once per client."""
        if self._limits is None:
            self._limits = batches.server_limits(self.models())
        return self._limits

    def _score_chunk(self, inputs: list[dict], body: dict, chunk: range) -> list[tuple[range, ScoreResponse]]:
        try:
            return [(chunk, self.score({**body, "inputs": inputs[chunk.start:chunk.stop]}))]
        except SpinfcError as error:
            if len(chunk) < 2 or not batches.split_on(error):
                raise
        return [answer for half in batches.halves(chunk) for answer in self._score_chunk(inputs, body, half)]

    # ---- sending ----------------------------------------------------------------------------------------------

    def send(self, call: Call):
        """Send `call`, trying again after a 429 as `Settings` says; the typed answer, or `SpinfcError`."""
        attempt = 0
        while True:
            response = self._http.request(call.method, self.settings.base_url + call.path, content=call.body,
                                          headers=self.settings.headers())
            try:
                return decode(call, response.status_code, response.headers, response.content)
            except SpinfcError as error:
                wait = wait_before_retry(self.settings, error, attempt)
                if wait is None:
                    raise
            time.sleep(wait)
            attempt += 1
