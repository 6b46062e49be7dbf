"""The worker's order on an asynchronous device (CUDA): a part-full pass that waited for the pass in flight is
launched as soon as that pass has ended, before that pass's scores are delivered, so the GPU does not sit idle
while results are assembled. A stand-in runner plays the GPU: launch stages the pass and returns, collect waits."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import torch

from spinfc.registry import load_tokenizer
from spinfc.runtime.engine import Engine
from spinfc.runtime.runner import Runner
from spinfc.shapes import Shapes

SHAPES = Shapes(budget=1024, block=64, answer_rows=128, reads=1024, sizes=(256, 512, 768, 1024))
QUERY = {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:<?>", "options": [" yes", " no"]}


class StandInGPU(Runner):
    """Launch returns at once; collect waits out the pass's `seconds`; every launch and collect is recorded."""

    def __init__(self, *args, events: list, seconds: float = 0.05, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asynchronous, self.events, self.seconds = True, events, seconds

    def launch(self, arrays):
        _, pending = self.stage(arrays)
        pending.output = torch.zeros(pending.output.shape[0])
        ends = time.perf_counter() + self.seconds
        pending.event = SimpleNamespace(synchronize=lambda: time.sleep(max(0.0, ends - time.perf_counter())),
                                        query=lambda: time.perf_counter() >= ends)
        self.events.append(("launch", {id(a) for a in arrays}))
        return pending

    def collect(self, pending):
        logprobs = super().collect(pending)
        self.events.append(("collect",))
        return logprobs


def test_a_pass_that_waited_is_launched_before_the_scores_of_the_pass_it_waited_for():
    tokenizer = load_tokenizer("gemma3-270m")
    model = SimpleNamespace(name="gemma3-270m", tokenizer=tokenizer, weights_hash="stand-in")
    engine = Engine(model, SHAPES, tokenizer=tokenizer)
    events: list = []
    engine.runner = StandInGPU(model, SHAPES, events=events, pad=0)
    deliver = engine._deliver
    engine._deliver = lambda unit, scores: (events.append(("deliver", id(unit.arrays))), deliver(unit, scores))
    # four contents of ~300 rows: the first pass holds two and the floor (77% of its 1,024 rows, launched on an idle
    # GPU), the second the other two (~69%): not full, so it waits for the first to end
    texts = [f"Customer message {i}: " + "the parcel arrived late and broken " * 40 for i in range(4)]
    body = {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts], "scoring": {"queries": [QUERY]}}

    async def go():
        compiled = engine.compile(body)
        job = await asyncio.wrap_future(engine.submit(compiled))
        return compiled, job

    engine.start()
    try:
        compiled, job = asyncio.run(go())
    finally:
        engine.close()
    assert len(job.scores) == len(compiled.segments)
    launches = [e[1] for e in events if e[0] == "launch"]
    assert len(launches) == 2, events
    kinds = [e[0] if e[0] != "deliver" else ("deliver", 0 if e[1] in launches[0] else 1) for e in events]
    assert kinds == ["launch", "collect", "launch", *[("deliver", 0)] * len(launches[0]), "collect",
                     *[("deliver", 1)] * len(launches[1])], kinds


def _burst(monkeypatch, linger: float) -> list:
    """Two one-content requests 30 ms apart on a quiet engine of fixed shapes; the passes launched (sets of arrays)."""
    from spinfc.runtime import engine as module

    monkeypatch.setattr(module, "LINGER", linger)
    tokenizer = load_tokenizer("gemma3-270m")
    model = SimpleNamespace(name="gemma3-270m", tokenizer=tokenizer, weights_hash="stand-in")
    engine = Engine(model, SHAPES, tokenizer=tokenizer)
    events: list = []
    engine.runner = StandInGPU(model, SHAPES, events=events, pad=0)
    bodies = [{"inputs": [{"messages": [{"role": "user", "content": f"Customer message {i}: the parcel is late."}]}],
               "scoring": {"queries": [QUERY]}} for i in range(2)]

    async def go():
        first, second = (engine.compile(b) for b in bodies)
        futures = [engine.submit(first)]
        await asyncio.sleep(0.03)
        futures.append(engine.submit(second))
        await asyncio.gather(*map(asyncio.wrap_future, futures))

    engine.start()
    try:
        asyncio.run(go())
    finally:
        engine.close()
    return [e[1] for e in events if e[0] == "launch"]


def test_the_first_pass_after_a_quiet_spell_lingers_for_a_request_close_behind(monkeypatch):
    assert len(_burst(monkeypatch, linger=2.0)) == 1  # both contents (and the floor) in one pass
    assert len(_burst(monkeypatch, linger=0.0)) == 2  # the first launched alone, nothing announced


def test_arrivals_that_fill_a_pass_are_launched_behind_the_one_running():
    """While a pass runs the worker does not sit in collect: the moment arrivals fill the next pass (more is queued
    than it holds, and what it holds is FULL), that pass is launched behind the running one, so the GPU does not
    wait for the host between them; what is left waits for the pass in flight as before."""
    tokenizer = load_tokenizer("gemma3-270m")
    model = SimpleNamespace(name="gemma3-270m", tokenizer=tokenizer, weights_hash="stand-in")
    engine = Engine(model, SHAPES, tokenizer=tokenizer)
    events: list = []
    engine.runner = StandInGPU(model, SHAPES, events=events, seconds=0.4, pad=0)
    text = "the parcel arrived late and broken " * 40  # ~300 rows with the question: three fill a 1,024-row pass
    first = {"inputs": [{"messages": [{"role": "user", "content": "Customer message: " + text}]}],
             "scoring": {"queries": [QUERY]}}
    after = {"inputs": [{"messages": [{"role": "user", "content": f"Message {i}: " + text}]} for i in range(4)],
             "scoring": {"queries": [QUERY]}}

    async def go():
        one, three = engine.compile(first), engine.compile(after)
        futures = [engine.submit(one)]
        await asyncio.sleep(0.05)  # the first pass is running (it lingered at most LINGER)
        futures.append(engine.submit(three))  # four more: three fill the next pass, the fourth is left over
        await asyncio.gather(*map(asyncio.wrap_future, futures))

    engine.start()
    try:
        asyncio.run(go())
    finally:
        engine.close()
    kinds = [(e[0], len(e[1])) if e[0] == "launch" else e[0] for e in events if e[0] != "deliver"]
    assert kinds == [("launch", 2), ("launch", 3), "collect", "collect", ("launch", 1), "collect"], kinds
