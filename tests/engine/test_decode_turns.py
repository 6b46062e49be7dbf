"""Extraction decodes take turns (issue 24): a short extraction request sent while a long one decodes is answered
first, and both answers are bit-identical to each request run alone. On the packaged SmolLM2-135M, fp32, CPU.

Deterministic, not timed: the short request is submitted once the long one's pass has run (its decode follows), and
the order the two requests end in is read from their futures. Before decodes took turns, an extraction pass waited
for the decode in flight to end, so the long request always ended first."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from spinfc.runtime.engine import Engine
from spinfc.runtime.extract.budget import DecodeMemory
from spinfc.runtime.extract.kv import PromptContext
from spinfc.runtime.load.loader import load_model
from spinfc.shapes import Shapes

pytestmark = pytest.mark.slow  # loads a packaged model

BUDGET = 512


def one(text: str, queries: list[dict]) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": text}]}], "scoring": {"queries": queries}}


# three searched slots of beam 4: about 17 decode steps (seconds on a CPU); the short one: one slot of beam 2
LONG = one("Customer message: my parcel never arrived, the tracking says Berlin, and nobody answers.",
           [{"id": f"q{k}", "template": f"\n\nQuote {k} of the customer's words:<*>\n", "beam_width": 4,
             "max_tokens": 16} for k in range(3)])
SHORT = one("Delivery note: three cups arrived broken on Tuesday.",
            [{"id": "day", "template": "\n\nQ: Which day?\nA: \"{*}\"", "beam_width": 2, "max_tokens": 4}])


@pytest.fixture(scope="module")
def model():
    return load_model("smollm2-135m", dtype=torch.float32, device="cpu")


def alone(model, body: dict):
    async def go():
        engine = Engine(model, Shapes.for_device("cpu", BUDGET)).start()
        try:
            return comparable((await engine.score(engine.compile(body))).scores)
        finally:
            engine.close()
    return asyncio.run(go())


def comparable(scores: dict) -> dict:
    """A request's scores by content, with a floor's prompt contexts (tensors) as nested lists: compared with ==,
    bit for bit."""
    def entry(value):
        if isinstance(value, PromptContext):
            return ([k.tolist() for k in value.keys], [v.tolist() for v in value.values], value.positions.tolist(),
                    value.token, value.position)
        return value
    return {content: tuple(map(entry, row)) for content, row in scores.items()}


def long_then_short(model, memory: DecodeMemory | None = None):
    """LONG submitted, SHORT once LONG's pass has run; -> (the order they ended in, LONG's scores, SHORT's)."""
    engine = Engine(model, Shapes.for_device("cpu", BUDGET))
    if memory is not None:
        engine.scheduler.decode_memory = memory
    ended: list[str] = []
    try:
        engine.start()
        long = engine.submit(engine.compile(LONG))
        long.add_done_callback(lambda _: ended.append("long"))
        short_compiled = engine.compile(SHORT)
        deadline = time.monotonic() + 120
        while engine.stats.passes < 1 and not long.done():
            assert time.monotonic() < deadline, "the long request's pass never ran"
            time.sleep(0.005)
        short = engine.submit(short_compiled)
        short.add_done_callback(lambda _: ended.append("short"))
        long_job, short_job = long.result(timeout=300), short.result(timeout=300)
        return ended, comparable(long_job.scores), comparable(short_job.scores)
    finally:
        engine.close()


def test_a_short_extraction_behind_a_long_one_ends_first_with_the_answers_it_gets_alone(model) -> None:
    long_alone, short_alone = alone(model, LONG), alone(model, SHORT)
    ended, long_scores, short_scores = long_then_short(model)
    assert ended == ["short", "long"], "the short extraction waited for the long one's decode to end"
    assert short_scores == short_alone
    assert long_scores == long_alone
    assert any(entry.answers for scores in long_scores.values() for entry in scores if hasattr(entry, "answers"))


class Watched(DecodeMemory):
    """A DecodeMemory that counts the groups holding it at once and the times a group was told to wait."""

    def __init__(self, total: int):
        super().__init__(total)
        self.holding = self.most_holding = self.refused = 0

    def take(self, size: int) -> bool:
        taken = super().take(size)
        self.holding += taken
        self.refused += not taken
        self.most_holding = max(self.most_holding, self.holding)
        return taken

    def give(self, size: int) -> None:
        super().give(size)
        self.holding -= 1


def test_decodes_short_of_memory_take_it_in_turn_and_answer_the_same(model) -> None:
    """A shared budget that holds one group at a time: the short decode's group waits while the long one's holds
    the memory (no two held at once, no deadlock), and the answers are still those alone."""
    memory = Watched(total=1)  # a group alone is always given; a second one never beside it
    _, long_scores, short_scores = long_then_short(model, memory)
    assert memory.refused > 0, "the two decodes never wanted the memory at once: the case proves nothing"
    assert memory.most_holding == 1 and memory.holding == 0 and memory.used == 0
    assert (long_scores, short_scores) == (alone(model, LONG), alone(model, SHORT))
