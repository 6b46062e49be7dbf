"""/v1/completions prompt logprobs as the engine's work (issue 38, item 4): the prompts of many completions packed
into shared passes, like /v1/score contents, row to row on the CPU, each prompt's scores those of its own pass alone
(bit for bit on CUDA, within the CPU's rounding here: a pass of another row count sums in another order), and a
completion whose client left withdrawn within one pass. A small random-weight Llama on the CPU."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from spinfc.runtime.engine import Engine
from spinfc.runtime.launch.prompt_logprobs import prompt_program, score_prompts
from spinfc.shapes import Shapes
from tests.rounding import assert_same_across_launches
from tests.runtime.test_parity_random import random_pair


class Held:
    """The model as the engine sees it, each forward under `lock` (which the test holds to stall a pass)."""

    def __init__(self, model, lock):
        self.model, self.lock = model, lock

    def forward(self, launch):
        with self.lock:
            return self.model.forward(launch)

    def __getattr__(self, name: str):
        return getattr(self.model, name)


SHAPES = Shapes.for_device("cpu", 1024, 16)  # blocks of 16 rows: 64 prompts of 3 tokens a pass
PROMPTS = [tuple(torch.randint(1, 96, (3,), generator=torch.Generator().manual_seed(i)).tolist()) for i in range(1000)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    ours, _ = random_pair("llama", tmp_path_factory.mktemp("llama"))
    return ours


def test_a_thousand_one_prompt_completions_share_passes_and_score_as_alone(model):
    engine = Engine(model, SHAPES, tokenizer=SimpleNamespace(pad_token_id=0))

    async def go():  # all of them queued before the worker looks, as a burst arriving during a pass is
        reads = [asyncio.ensure_future(engine.read_prompts([p], top=1)) for p in PROMPTS]
        await asyncio.sleep(0)
        engine.start()
        return await asyncio.gather(*reads)

    try:
        answers = asyncio.run(go())
    finally:
        engine.close()
    # packed row to row on the CPU (Shapes.prompt_block): 3,000 rows in 3 passes, not one 16-row block per prompt
    # (63 passes; issue 47 item 4: a pass's cost is its rows, padding included)
    assert engine.stats.prompt_passes == math.ceil(sum(map(len, PROMPTS)) / SHAPES.budget) == 3
    for k in range(0, len(PROMPTS), 97):
        program = prompt_program([PROMPTS[k]], "random", SHAPES.budget, SHAPES.prompt_block, largest=SHAPES.largest)
        (alone,) = score_prompts(model, program, top=1)
        assert_same_across_launches(answers[k], [alone], model.device)


def test_a_completion_whose_client_left_is_withdrawn_within_one_pass(model):
    lock = threading.Lock()
    engine = Engine(Held(model, lock), SHAPES, tokenizer=SimpleNamespace(pad_token_id=0)).start()

    async def go():
        with lock:  # the first pass waits for the model while the client leaves
            reads = [asyncio.ensure_future(engine.read_prompts(PROMPTS, top=1)) for _ in range(3)]
            await asyncio.sleep(0.3)
            for read in reads:
                read.cancel()
            await asyncio.gather(*reads, return_exceptions=True)
        deadline = time.monotonic() + 10
        while engine.scheduler.reads and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)

    try:
        asyncio.run(go())
        assert engine.stats.prompt_passes == 1  # the pass already waiting for the model, none of the other 46
    finally:
        engine.close()
