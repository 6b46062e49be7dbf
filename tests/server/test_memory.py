"""The server's memory stays flat over a stream of varied requests (issue 38): every cache it keeps between
requests is bounded, so once the bounded caches are full the resident memory stops growing. Each request asks its
own question set (a large one, so that a set kept for ever shows in the resident memory), or a chat turn, or number
and amount extraction.

The caches' bounds are set small here, so that they fill within the warm-up; then the resident memory is read after
each of ROUNDS rounds of ROUND requests, and the slope of those readings (least squares, MB per 100 requests) must
stay under SLOPE_MB. A cache that keeps something per question set of these requests fails it: the intake's sets
unbounded grew +17.9 MB per 100 requests (the compile memo's tries, kept for ever before issue 38, are twice their
size). What stays under it is a step of a few MB these requests show once (near request 150: glibc's arenas, gone
with MALLOC_ARENA_MAX=1, where the slope is +1.1) and what is not set small here (parsed templates, 2,048: about
1 KB each). The numbers at the server's own bounds, over 1,000
requests, are in BENCHMARKS.md ("Memory over 1,000 requests")."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import random

import httpx
import psutil
import pytest

from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app
from tests.runtime.tiny_llama import tiny_llama
from tests.server.live import live_server

pytestmark = pytest.mark.slow

WARM, ROUND, ROUNDS = 40, 30, 5  # requests before the first reading, and between readings
SLOPE_MB = 5.0  # resident growth allowed per 100 requests once the caches are full (measured: +3.1, +3.3)
WORDS = "refund invoice delivery broken screen password account late parcel charge twice cancel order".split()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A llama folder of random weights (seed 0) with SmolLM2's tokenizer, written by transformers."""
    return str(tiny_llama(tmp_path_factory.mktemp("tiny")))


def request(i: int) -> tuple[str, dict]:
    """The i-th request: a content, and a question set of its own (120 questions) or another route."""
    rng = random.Random(i)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + f" (ticket {i})"
    messages = [{"role": "user", "content": text}]
    if i % 5 == 4:
        return "/v1/chat/completions", {"messages": messages, "max_tokens": 3, "seed": i}
    if i % 5 == 3:
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "n", "template": f"\n\nHow many orders ({i})?\nA: <n>"},
            {"id": "m", "template": f"\n\nHow much money ({i})?\nA: <$>"}]}}
    topics = [f"{rng.choice(WORDS)} case {i}-{k}" for k in range(60)]
    return "/v1/score", {"messages": messages, "scoring": {"queries": [
        {"id": "about", "template": f"\n\nRequest {i}: is it about {{t}}?\nAnswer:<?>",
         "options": [" yes", " no", " not sure at all"], "placeholders": {"t": topics}},
        {"id": "urgent", "template": f"\n\nRequest {i}: is {{t}} urgent?\nAnswer:<?>",
         "options": [" yes", " no"], "placeholders": {"t": topics}}]}}


def resident_mb() -> float:
    """The process's resident memory once garbage is collected and the C heap's free pages are returned (what is
    still held, not what the allocator happens to keep: its free lists wander by tens of MB from one reading to
    the next)."""
    gc.collect()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    return psutil.Process().memory_info().rss / 2**20


def slope(readings: list[float], step: int) -> float:
    """The least-squares slope of `readings` taken every `step` requests, in MB per 100 requests."""
    n = len(readings)
    mean_x, mean_y = (n - 1) / 2, sum(readings) / n
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(readings))
    variance = sum((x - mean_x) ** 2 for x in range(n))
    return covariance / variance / step * 100


def test_resident_memory_is_flat_over_varied_requests(model, monkeypatch) -> None:
    import importlib

    from spinfc.passes import context
    from spinfc.runtime.admit import intake

    tokenize = importlib.import_module("spinfc.passes.tokenize")  # the module (the package exports its function)

    monkeypatch.setattr(context, "SETS_REMEMBERED", 8)  # the compile memo's question sets
    monkeypatch.setattr(tokenize, "MEMO_ENTRIES", 1024)  # the texts' encodings
    monkeypatch.setattr(intake, "SETS_REMEMBERED", 8)  # the intake's score maps and trees
    settings = Settings(engine=EngineSettings(model=model, device="cpu", token_budget=1024, warmup="none",
                                              content_cache_tokens=2048))
    app = create_app(settings)
    readings = []
    with live_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        app.state.service.engine.scheduler.floor_cache_size = 8  # the floors' scores, one per question set

        def send(first: int, count: int) -> None:
            for i in range(first, first + count):
                path, body = request(i)
                answer = client.post(path, json=body)
                assert answer.status_code == 200, answer.text

        send(0, WARM)
        readings.append(resident_mb())
        for r in range(ROUNDS):
            send(WARM + r * ROUND, ROUND)
            readings.append(resident_mb())
    growth = slope(readings, ROUND)
    print(f"resident MB every {ROUND} requests after {WARM}: {' '.join(f'{m:.1f}' for m in readings)} "
          f"({growth:+.2f} MB per 100 requests)")
    assert growth < SLOPE_MB, f"{growth:+.2f} MB per 100 requests: {readings}"
