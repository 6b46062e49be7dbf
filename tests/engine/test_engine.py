"""The engine on the real default model (gemma3-270m, fp32, CPU): requests packed into shared passes, results
independent of neighbours, the floor cache, a failing pass isolated to its request, withdrawn requests dropped."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.registry import load_tokenizer
from spinfc.runtime.engine import Engine, PassFailed
from spinfc.runtime.load.loader import load_model
from spinfc.shapes import Shapes
from tests.rounding import assert_same_across_launches

pytestmark = pytest.mark.slow  # loads a packaged model

BUDGET = 384  # three 128-row blocks: a pass holds three of these small contents

TICKET = "Customer support message:\nI was charged twice for September, please refund one of the charges."
OTHER = "Customer support message:\nThe app crashes every time I open the settings page."
THIRD = "Customer support message:\nPlease close my account, I am moving to another provider."
REFUND = {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:<?>", "options": [" yes", " no"]}
TOPIC = {"id": "topic", "template": "\n\nTopic (billing, technical, or account):{?}",
         "options": [" billing", " technical", " account"]}


def body(*texts: str, queries=(REFUND,)) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts],
            "scoring": {"queries": list(queries)}}


@pytest.fixture(scope="module")
def model():
    return load_model("gemma3-270m", dtype=torch.float32, device="cpu")


def run(engine: Engine, *bodies: dict, start: bool = True):
    """Compile `bodies`, submit them all before the worker looks (so they meet in the same passes), await all."""
    async def go():
        compiled = [engine.compile(b) for b in bodies]
        futures = [engine.submit(c) for c in compiled]
        if start:
            engine.start()
        jobs = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
        return compiled, jobs
    return asyncio.run(go())


def option_logprobs(job, content: int) -> list[float]:
    return [lp for question in job.scores[content] for lp in question]


def test_requests_share_passes_and_results_do_not_depend_on_neighbours(model) -> None:
    alone = Engine(model, Shapes.for_device("cpu", BUDGET))
    try:
        _, (solo,) = run(alone, body(TICKET))
        assert alone.stats.passes == 1  # the content and its floor
    finally:
        alone.close()

    packed = Engine(model, Shapes.for_device("cpu", BUDGET))
    try:
        # request a: two contents, the ticket second; request b: the ticket with two questions (its own floor)
        (ca, cb), (a, b) = run(packed, body(OTHER, TICKET), body(TICKET, queries=(REFUND, TOPIC)))
        segments = len(ca.segments) + len(cb.segments)
        assert segments == 5 and packed.stats.passes == 2  # five one-block segments in three-block passes
        assert packed.stats.rows_used == sum(s.length for s in ca.segments + cb.segments)
        assert_same_across_launches(option_logprobs(a, 1), option_logprobs(solo, 0), model.device)
        assert_same_across_launches(option_logprobs(a, 2), option_logprobs(solo, 1), model.device)  # the floors
        assert_same_across_launches(list(b.scores[0][0]), list(solo.scores[0][0]), model.device)  # the same question
        assert a.floor_cached is False and a.processed_tokens == sum(s.length for s in ca.segments)
    finally:
        packed.close()


def test_the_floor_runs_once_per_question_set(model) -> None:
    engine = Engine(model, Shapes.for_device("cpu", BUDGET))
    try:
        # two requests with the same questions meet in the queue: one floor segment serves both
        (c1, c2), (j1, j2) = run(engine, body(TICKET), body(OTHER))
        assert engine.stats.floor_misses == 1 and engine.stats.floor_hits == 1
        assert engine.stats.rows_used == sum(s.length for s in c1.segments) + c2.segments[0].length
        assert j1.scores[c1.floor] == j2.scores[c2.floor]

        async def again():
            scored = await engine.score(engine.compile(body(THIRD)))
            return scored
        scored = asyncio.run(again())
        assert scored.floor_cached and scored.processed_tokens == scored.compiled.segments[0].length
        assert scored.scores[scored.compiled.floor] == j1.scores[c1.floor]
        results = scored.results()
        assert len(results) == 1 and results[0][0].id == "refund"
        assert sum(o.p for o in results[0][0].combinations[0].options) == pytest.approx(1.0)
    finally:
        engine.close()


class Poisoned:
    """The real model, except that a pass holding `token` raises (a stand-in for a bug a content triggers)."""

    def __init__(self, model, token: int):
        self.model, self.token = model, token
        self.name, self.weights_hash, self.tokenizer = model.name, model.weights_hash, model.tokenizer

    def forward(self, launch):
        if bool((launch.tokens == self.token).any()):
            raise RuntimeError("poisoned pass")
        return self.model.forward(launch)


def test_a_failing_pass_fails_only_the_request_that_caused_it(model) -> None:
    poison = load_tokenizer("gemma3-270m")(" zebra", add_special_tokens=False)["input_ids"][-1]
    # the content cache off: a pass that records its contents' keys and values runs the stack directly, not the
    # stand-in's forward
    engine = Engine(Poisoned(model, poison), Shapes.for_device("cpu", BUDGET), content_cache_tokens=0)
    try:
        (_, cgood), (bad, good) = run(engine, body("A zebra escaped from the zoo."), body(TICKET))
        assert isinstance(bad, PassFailed) and "poisoned pass" in str(bad)
        assert not isinstance(good, Exception) and set(good.scores) == {0, 1}
        assert engine.stats.requests_failed == 1 and engine.stats.requests_done == 1
    finally:
        engine.close()


def test_a_withdrawn_request_is_dropped_before_it_runs(model) -> None:
    engine = Engine(model, Shapes.for_device("cpu", BUDGET))
    try:
        async def go():
            withdrawn = engine.submit(engine.compile(body(OTHER, THIRD, queries=(TOPIC,))))
            kept = engine.compile(body(TICKET))
            future = engine.submit(kept)
            assert withdrawn.cancel()
            engine.start()
            await asyncio.wrap_future(future)
            return kept
        kept = asyncio.run(go())
        assert engine.stats.passes == 1 and engine.stats.rows_used == sum(s.length for s in kept.segments)
        assert engine.stats.queued == 0
    finally:
        engine.close()


@pytest.mark.parametrize("template", ["\n\nWhich month?\nA: \"<*>\"", "Amount: <$>", "Count: {n}", "Say: <gen>"])
def test_extraction_questions_compile_with_their_prompt_rows(model, template: str) -> None:
    """An extraction question's segment carries the row where its decode starts (its prompt's last token), on every
    content and on the floor; it adds no answer read."""
    engine = Engine(model, Shapes.for_device("cpu", BUDGET))
    compiled = engine.compile(body(TICKET, queries=(REFUND, {"id": "month", "template": template})))
    for segment in compiled.segments:
        prompts = {p.question: p.row for p in segment.prompt_rows}
        assert set(prompts) == {0, 1} and {r.question for r in segment.reads} == {0}
        assert segment.tokens[prompts[1]] == compiled.program.questions[1].tokens[-1]
    engine.close()


def test_a_failing_pass_observer_does_not_fail_the_pass(model) -> None:
    def observer(tokens: int, rows: int, seconds: float) -> None:
        raise ValueError("metrics are broken")

    engine = Engine(model, Shapes.for_device("cpu", BUDGET), on_pass=observer)
    try:
        _, jobs = run(engine, body(TICKET))
    finally:
        engine.close()
    assert not isinstance(jobs[0], Exception), jobs[0]
    assert engine.stats.passes >= 1


def test_a_request_that_cannot_be_admitted_fails_alone_and_does_not_hang(model, monkeypatch) -> None:
    import spinfc.runtime.schedule.queues as engine_module

    real = engine_module.floor_first  # the worker asks it of every job it admits
    calls = []

    def first_fails(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("cannot order")
        return real(*args)

    monkeypatch.setattr(engine_module, "floor_first", first_fails)
    engine = Engine(model, Shapes.for_device("cpu", BUDGET))
    try:
        _, jobs = run(engine, body(TICKET), body(OTHER))
    finally:
        engine.close()
    assert isinstance(jobs[0], PassFailed) and "could not be queued" in str(jobs[0])
    assert not isinstance(jobs[1], Exception), jobs[1]
