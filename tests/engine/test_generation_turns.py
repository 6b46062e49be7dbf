"""Generations as the engine's work (turns.py): a generation draws a token at a time in the engine's loop, in turn with
the passes and the other generations; its tokens are those it draws alone; one whose caller left is dropped before
its next token; one cancelled (its cancel token set) ends at its next step as an answer, the others untouched;
the engine's close ends those still running. A small random-weight Llama on the CPU."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.engine import Engine
from spinfc.runtime.launch.generate import Cancelled, Sampling, generate, generating
from spinfc.shapes import Shapes
from tests.runtime.test_parity_random import random_pair

SHAPES = Shapes.for_device("cpu", 1024, 16)
PROMPT = ChatPrompt(tokens=(5, 17, 42, 8), end_tokens=frozenset())  # no end token: each runs to max_tokens
PROMPTS = [tuple(torch.randint(1, 96, (3,), generator=torch.Generator().manual_seed(i)).tolist()) for i in range(8)]


class Digits:
    """A tokenizer double: a token's text is its number."""

    def decode(self, tokens, skip_special_tokens=False) -> str:
        return " ".join(map(str, tokens))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    ours, _ = random_pair("llama", tmp_path_factory.mktemp("llama"))
    return ours


def steps(model, max_tokens: int, **kw):
    return generating(model, Digits(), PROMPT, Sampling(max_tokens=max_tokens, temperature=0), **kw)


def test_a_prompt_read_behind_a_long_generation_waits_a_token_not_the_answer(model):
    engine = Engine(model, SHAPES, tokenizer=SimpleNamespace(pad_token_id=0)).start()
    try:
        long = engine.generate(steps(model, 200), 200)
        while long.left == 200:  # it has started
            time.sleep(0.01)
        read = asyncio.run(engine.read_prompts(PROMPTS, top=1))
        assert long.left > 0 and not long.future.done()  # the prompts were read between two of its tokens
        assert len(read) == len(PROMPTS)
        drawn = long.future.result(timeout=120)
    finally:
        engine.close()
    alone = generate(model, Digits(), PROMPT, Sampling(max_tokens=200, temperature=0))
    assert drawn.tokens == alone.tokens and len(drawn.tokens) == 200  # the same tokens as alone


def test_generations_take_turns_and_a_withdrawn_one_stops_before_its_next_token(model):
    engine = Engine(model, SHAPES, tokenizer=SimpleNamespace(pad_token_id=0)).start()
    try:
        first, second = engine.generate(steps(model, 400), 400), engine.generate(steps(model, 4000), 4000)
        deadline = time.monotonic() + 60
        while (first.left > 390 or second.left > 3990) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.left <= 390 and second.left <= 3990  # both draw: neither waits for the other's answer
        assert first.future.cancel()
        while first.left and time.monotonic() < deadline:  # dropped (its `left` 0) before its next token
            time.sleep(0.01)
        was = second.left
        while second.left >= was and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.left == 0 and 0 < second.left < was  # the other one goes on
    finally:
        engine.close()
    with pytest.raises(Cancelled):  # the engine's close ends a generation still running
        second.future.result(timeout=10)


def test_a_generation_the_model_fails_is_told_and_the_loop_goes_on(model):
    class Broken:
        config, device = model.config, model.device

        def decode(self, step, cache):
            raise RuntimeError("the decode broke")

    engine = Engine(model, SHAPES, tokenizer=SimpleNamespace(pad_token_id=0)).start()
    try:
        broken = engine.generate(generating(Broken(), Digits(), PROMPT, Sampling(max_tokens=4, temperature=0)), 4)
        with pytest.raises(RuntimeError, match="the decode broke"):
            broken.future.result(timeout=60)
        fine = engine.generate(steps(model, 3), 3)
        assert len(fine.future.result(timeout=60).tokens) == 3
    finally:
        engine.close()
    late = engine.generate(steps(model, 3), 3)
    with pytest.raises(Cancelled):
        late.future.result(timeout=1)
    assert isinstance(late.future, concurrent.futures.Future)


def test_a_cancelled_generation_ends_at_its_next_step_and_frees_its_place_the_others_untouched(model):
    """The cancel token (POST /v1/chat/completions/control) ends one generation as an answer, finish "cancelled",
    with the tokens it drew (those it draws alone); its steps end (their KV cache goes with them) and it leaves the
    engine's turns; the generation beside it draws exactly what it draws alone."""
    engine = Engine(model, SHAPES, tokenizer=SimpleNamespace(pad_token_id=0)).start()
    cancel = threading.Event()
    try:
        cancelled = engine.generate(steps(model, 4000, cancel=cancel), 4000)
        other = engine.generate(steps(model, 300), 300)
        deadline = time.monotonic() + 60
        while cancelled.left > 3990 and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.set()
        cut = cancelled.future.result(timeout=60)
        assert cut.finish_reason == "cancelled" and 10 <= len(cut.tokens) < 4000
        assert cancelled.steps.gi_frame is None and cancelled.left == 0  # its steps ended: its cache is freed
        drawn = other.future.result(timeout=120)
        assert cancelled not in engine.scheduler.turns.active and not engine.scheduler.turns.active
    finally:
        engine.close()
    assert cut.tokens == generate(model, Digits(), PROMPT, Sampling(max_tokens=len(cut.tokens), temperature=0)).tokens
    assert drawn.finish_reason == "length"
    assert drawn.tokens == generate(model, Digits(), PROMPT, Sampling(max_tokens=300, temperature=0)).tokens
