"""The worker's order on an asynchronous device (CUDA), with a stand-in runner playing the GPU (launch stages the
pass and returns, collect waits out its time):

- a part-full pass that waited for the pass in flight is launched as soon as that pass has ended, before that
  pass's scores are delivered, so the GPU does not sit idle while results are assembled;
- arrivals that fill the next pass while one runs are launched behind it at once;
- the first pass after a quiet spell lingers (LINGER) for a request close behind."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import torch

from spinfc.registry import load_tokenizer
from spinfc.runtime.engine import Engine
from spinfc.runtime.launch.runner import Runner
from spinfc.shapes import Shapes

SHAPES = Shapes(budget=1024, block=64, answer_rows=128, reads=1024, sizes=(256, 512, 768, 1024))
QUERY = {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:<?>", "options": [" yes", " no"]}
LONG = "the parcel arrived late and broken " * 40  # ~300 rows with the question: three fill a 1,024-row pass


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


def body(*texts: str) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts], "scoring": {"queries": [QUERY]}}


def stand_in_engine(seconds: float = 0.05) -> tuple[Engine, list]:
    """An engine of fixed shapes on the stand-in GPU (passes of `seconds`), and the list its events go to."""
    tokenizer = load_tokenizer("gemma3-270m")
    model = SimpleNamespace(name="gemma3-270m", tokenizer=tokenizer, weights_hash="stand-in")
    engine = Engine(model, SHAPES, tokenizer=tokenizer)
    events: list = []
    engine.runner = StandInGPU(model, SHAPES, events=events, seconds=seconds, pad=0)
    return engine, events


def run(engine: Engine, first: dict, then: dict | None = None, after: float = 0.0) -> list:
    """Compile the bodies, submit `first` and, `after` seconds later, `then`; the jobs once all are scored."""
    async def go():
        compiled = [engine.compile(b) for b in (first, then) if b is not None]
        futures = [engine.submit(compiled[0])]
        if len(compiled) > 1:
            await asyncio.sleep(after)
            futures.append(engine.submit(compiled[1]))
        return await asyncio.gather(*map(asyncio.wrap_future, futures))

    engine.start()
    try:
        return asyncio.run(go())
    finally:
        engine.close()


def test_a_pass_that_waited_is_launched_before_the_scores_of_the_pass_it_waited_for():
    engine, events = stand_in_engine()
    deliver = engine.scheduler._deliver
    engine.scheduler._deliver = lambda unit, scores: (events.append(("deliver", id(unit.arrays))),
                                                      deliver(unit, scores))
    # four contents of ~300 rows: the first pass holds two and the floor (77% of its 1,024 rows, launched on an idle
    # GPU), the second the other two (~69%): not full, so it waits for the first to end
    (job,) = run(engine, body(*(f"Customer message {i}: " + LONG for i in range(4))))
    assert len(job.scores) == 5  # four contents and the floor
    launches = [e[1] for e in events if e[0] == "launch"]
    assert len(launches) == 2, events
    kinds = [e[0] if e[0] != "deliver" else ("deliver", 0 if e[1] in launches[0] else 1) for e in events]
    assert kinds == ["launch", "collect", "launch", *[("deliver", 0)] * len(launches[0]), "collect",
                     *[("deliver", 1)] * len(launches[1])], kinds


def test_arrivals_that_fill_a_pass_are_launched_behind_the_one_running():
    """While a pass runs the worker does not sit in collect: the moment arrivals fill the next pass (more is queued
    than it holds, and what it holds is FULL), that pass is launched behind the running one, so the GPU does not
    wait for the host between them; what is left waits for the pass in flight as before."""
    engine, events = stand_in_engine(seconds=0.4)
    # the first pass is running 50 ms later (it lingered at most LINGER); then four more: three fill the next pass,
    # the fourth is left over
    run(engine, body("Customer message: " + LONG), body(*(f"Message {i}: " + LONG for i in range(4))), after=0.05)
    kinds = [(e[0], len(e[1])) if e[0] == "launch" else e[0] for e in events]
    assert kinds == [("launch", 2), ("launch", 3), "collect", "collect", ("launch", 1), "collect"], kinds


def burst(monkeypatch, linger: float) -> list:
    """Two one-content requests 30 ms apart on a quiet engine; the passes launched (sets of arrays)."""
    from spinfc.runtime.schedule import scheduler as module

    monkeypatch.setattr(module, "LINGER", linger)
    engine, events = stand_in_engine()
    run(engine, body("Customer message 0: the parcel is late."), body("Customer message 1: the parcel is late."),
        after=0.03)
    return [e[1] for e in events if e[0] == "launch"]


def test_the_first_pass_after_a_quiet_spell_lingers_for_a_request_close_behind(monkeypatch):
    assert len(burst(monkeypatch, linger=2.0)) == 1  # both contents (and the floor) in one pass
    assert len(burst(monkeypatch, linger=0.0)) == 2  # the first launched alone, nothing announced
