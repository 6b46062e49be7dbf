"""HTTP senders, as a user's client sends: one body (a 429 waits its Retry-After and is sent again), a pattern of
bodies sent by `concurrency` clients at once, the server's pass counter (/metrics), and the scores of an answer."""

from __future__ import annotations

import asyncio
import time

import httpx


async def post(client: httpx.AsyncClient, body: dict, counts: dict, route: str = "/v1/score") -> dict:
    """The answer to `body`; `counts` tallies the 429s (each retried) and 5xx answers."""
    while True:
        response = await client.post(route, json=body)
        if response.status_code == 429:
            counts["429"] += 1
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            continue
        if response.status_code >= 500:
            counts["5xx"] += 1
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:600]}")
        return response.json()


def scores_of(answer: dict) -> list:
    """[input][query][option] logprobs of a /v1/score answer to an `inputs` request."""
    return [[[o["logprob"] for o in q["combinations"][0]["options"]] for q in item["results"]]
            for item in answer["inputs"]]


def metric(text: str, name: str) -> float:
    """The value of `name` (a metric without labels) in a /metrics page's `text`."""
    return float(next(line.split()[-1] for line in text.splitlines() if line.split(" ")[0] == name))


async def passes_run(client: httpx.AsyncClient) -> int:
    """The server's spinfc_passes_total."""
    return int(metric((await client.get("/metrics")).text, "spinfc_passes_total"))


async def _pattern(url: str, bodies: list[dict], concurrency: int, questions: int, route: str) -> dict:
    counts = {"429": 0, "5xx": 0}
    answers: list = [None] * len(bodies)
    queue = list(range(len(bodies)))
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        async def worker():
            while queue:
                i = queue.pop(0)
                answers[i] = await post(client, bodies[i], counts, route)
        before = await passes_run(client)
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - began
        passes = await passes_run(client) - before
    return {"seconds": round(seconds, 3), "questions_per_s": round(questions / seconds, 1), "passes": passes,
            **counts, "answers": answers}


def pattern(url: str, bodies: list[dict], concurrency: int, questions: int, route: str = "/v1/score") -> dict:
    """`bodies` sent by `concurrency` clients at once (each takes the next body when its answer came): seconds,
    questions/s (`questions` answered in all), passes the server ran meanwhile, 429 and 5xx counts, the answers."""
    return asyncio.run(_pattern(url, bodies, concurrency, questions, route))


async def _batches(url: str, texts: list[str], questions: dict, batch_size: int, in_flight: int):
    async with httpx.AsyncClient(base_url=url, timeout=1800) as client:
        gate, counts = asyncio.Semaphore(in_flight), {"429": 0, "5xx": 0}

        async def one(batch: list[str]) -> dict:
            async with gate:
                return await post(client, {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in batch],
                                           **questions}, counts)
        began = time.perf_counter()
        answers = await asyncio.gather(*(one(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)))
        return time.perf_counter() - began, answers, counts


def batches(url: str, texts: list[str], questions: dict, batch_size: int = 32, in_flight: int = 4):
    """A file's rows as a user's own client sends them: `batch_size` texts per /v1/score request (`questions`: the
    body's `packs` and/or `scoring`), `in_flight` requests at once. Returns (rates, the answers in order)."""
    seconds, answers, counts = asyncio.run(_batches(url, texts, questions, batch_size, in_flight))
    asked = sum(a["usage"]["questions"] for a in answers)
    return {"rows": len(texts), "errors": 0, "seconds": round(seconds, 1), "rows/s": round(len(texts) / seconds, 2),
            "questions/s": round(asked / seconds, 1), **counts}, answers
