"""The engine: owns the model, its tokenizer and the pass shapes; compiles requests and runs every request's
contents, and every completion's prompts, in shared passes.

    compile  (a compile thread)  body -> frontend -> compiler.compile(program, ctx, until="segment") -> `Segment`s,
                                 one per content and the floor (the same driver `spinfc compile` runs; intake.py)
    submit   (any thread)        a compiled request (or a completion's prompts: `read_prompts`, or a generation:
                                 `generate`) joins the scheduler's inbox; returns a future of its scores
    worker   (one thread)        the loop, as nano-vllm's `LLMEngine.step` and vLLM's `EngineCore` write it:
                                 `work = scheduler.schedule()` (scheduler.py: every decision, over the queues it
                                 owns), `result = self.run(work)` (the runner launches it through the fixed shapes),
                                 `scheduler.deliver(work, result)` (scores to requests, floors, decodes, jobs done)

A pass holds segments of any number of requests; a segment's rows are the same wherever it lands (sizing.py), so a
content's results never depend on its neighbours. Whether passes overlap is decided once, at start: on CUDA the
runner's launch returns at once, so pass k+1 is scheduled and staged while pass k runs, and pass k's results are
delivered after pass k+1 is launched.

The floor (the questions on empty content) is run once per question set and cached. A content read before comes
from the content cache (its keys and values; runtime/launch/content_cache.py, cached_rows.py): only its questions' rows
run. A pass that raises is retried with each of its segments alone, so only the request whose segment fails gets the
error. A pass with extraction questions keeps its keys and values; its decode then runs a slice at a time, in turn
with the other work (scheduler.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence

from spinfc.ir.nodes import Program
from spinfc.passes import PassContext
from spinfc.runtime.admit.compiled import Compiled, Scored
from spinfc.runtime.admit.intake import Intake
from spinfc.runtime.extract.kv import stack_of
from spinfc.runtime.extract.scheduling import decodes_at_once
from spinfc.runtime.launch.cached_rows import PassCache
from spinfc.runtime.launch.content_cache import ContentCache
from spinfc.runtime.launch.generate import Cancelled
from spinfc.runtime.launch.prompt_logprobs import PromptScores, prompt_program, score_prompts
from spinfc.runtime.launch.runner import Runner
from spinfc.runtime.schedule import allocator
from spinfc.runtime.schedule.scheduler import (  # noqa: F401 (EngineClosed, PassFailed re-exported)
    FULL, EngineClosed, EngineStats, PassFailed, Scheduler)
from spinfc.runtime.schedule.turns import Generating
from spinfc.runtime.schedule.work import (
    Collect,
    DecodeSlice,
    Failed,
    GenerateStep,
    Job,
    Launched,
    Pass,
    PromptPass,
    PromptRead,
)
from spinfc.shapes import Shapes

log = logging.getLogger("spinfc.engine")

WARMUP_REQUEST = {
    "messages": [{"role": "user", "content": "Customer message: the parcel arrived broken."}],
    "scoring": {"queries": [{"id": "warmup", "template": "\n\nIs the customer unhappy?\nAnswer:<?>",
                             "options": [" yes", " no"]}]},
}


def warmup_request(codes: tuple[str, ...]) -> dict:
    """WARMUP_REQUEST, its question read over every code where the model is a decision model (`codes`)."""
    if not codes:
        return WARMUP_REQUEST
    query = {**WARMUP_REQUEST["scoring"]["queries"][0], "codes": "all"}
    del query["options"]
    return {**WARMUP_REQUEST, "scoring": {"queries": [query]}}


class Engine:
    def __init__(self, model, shapes: Shapes, *, device: str = "cpu", tokenizer=None, floor_cache_size: int = 256,
                 on_pass: Callable[[int, int, float], None] | None = None, content_cache_tokens: int | None = None,
                 content_cache_room: int | None = None, media=None):
        """`model.forward(launch) -> [N] logprobs` (a stack, or a GraphedModel of `shapes` on CUDA); `shapes` the
        pass shapes chosen at start-up (`Shapes.for_device`); `tokenizer` the model's (default: `model.tokenizer`);
        `on_pass(tokens_used, rows_launched, seconds)` is called after each pass (metrics); `content_cache_tokens`
        the content cache's budget (`content_cache.py`; None: its default for the device, within
        `content_cache_room` bytes where `--max-memory` leaves that much, 0: off)."""
        self.model = model
        self.shapes = shapes
        self.device = device
        self.tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        # `media`: what reads a content's media (towers.MediaReader); None refuses media
        # a decision model's codes (its head's labels): what tokenize reads a question's code slot as
        self.context = PassContext(tokenizer=self.tokenizer, shapes=shapes, media=media,
                                   codes=getattr(model, "codes", ()))
        self.runner = Runner(model, shapes, device, pad=self.tokenizer.pad_token_id or 0)
        self.stats = EngineStats()
        self.contents = PassCache(ContentCache.for_model(model, device, content_cache_tokens, content_cache_room))
        self.intake = Intake(model, self.context)
        self.scheduler = Scheduler(shapes, model, self.stats, decode_limit=decodes_at_once(model, device),
                                   ran=lambda pending: self.runner.done(pending),
                                   expecting=lambda: self.intake.expecting, on_pass=on_pass,
                                   floor_cache_size=floor_cache_size, on_idle=allocator.trim,
                                   idle_seconds=allocator.IDLE_TRIM_SECONDS)
        # the compile side's entry points (runtime/admit/intake.py), on the engine as every caller knows them
        self.compile, self.compile_program = self.intake.compile, self.intake.compile_program
        self.compile_async, self.compile_program_async = self.intake.compile_async, self.intake.compile_program_async
        self._worker = threading.Thread(target=self._loop, name="spinfc-engine", daemon=True)
        self._closed = False

    # ---- the caller's side --------------------------------------------------------------------------------

    def start(self) -> "Engine":
        self.scheduler.overlap = self.runner.asynchronous  # decided once: the loop never asks again
        self._worker.start()
        return self

    def close(self) -> None:
        """Stop the worker after the pass in flight; requests still waiting fail with EngineClosed."""
        if not self._closed:
            self._closed = True
            self.scheduler.inbox.put(None)
            if self._worker.is_alive():
                self._worker.join()
            self.intake.close()
            self.contents.cache.clear()

    def submit(self, compiled: Compiled) -> concurrent.futures.Future:
        """Queue a compiled request; the future resolves to its `Job` or raises PassFailed / EngineClosed.
        Cancelling the future withdraws the request: its contents not yet run are dropped."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            future.set_exception(EngineClosed("the engine is shut down"))
            return future
        with self.stats.lock:
            self.stats.queued += 1
        self.intake.submitted(compiled)
        future.add_done_callback(self.stats.settled)
        self.scheduler.add(Job(compiled=compiled, future=future))
        return future

    async def score(self, compiled: Compiled) -> Scored:
        """Run a compiled request in shared passes; raises PassFailed or EngineClosed."""
        job = await asyncio.wrap_future(self.submit(compiled))
        return Scored(compiled, dict(job.scores), job.processed_tokens, job.floor_cached, tuple(job.placements))

    async def compile_and_score(self, program: Program | Callable[[], Program],
                                check: Callable[[Program], None] | None = None) -> Scored:
        """`compile_program` and `submit` in one turn of the compile thread, then the scores: the request joins the
        queue the moment it is compiled, without waiting for a turn of the event loop (which a burst of requests
        keeps busy). `program` may be the function that builds it (the server's frontend and checks), run first in
        the same turn: requests arriving together are then built and compiled one after the other in arrival
        order, rather than all built at once on a pool of threads sharing the GIL, none compiled until the last
        is built. Raises what building, the compile or the run raise."""
        def on_thread() -> tuple[Compiled, concurrent.futures.Future]:
            compiled = self.compile_program(program() if callable(program) else program, check)
            return compiled, self.submit(compiled)

        handed = self.intake.on_thread(on_thread)  # on the compile thread's queue before this coroutine yields
        try:
            compiled, future = await asyncio.shield(handed)
        except asyncio.CancelledError:  # withdraw the job once it exists (a client that hung up)
            handed.add_done_callback(lambda done: done.cancelled() or done.exception() or done.result()[1].cancel())
            raise
        job = await asyncio.wrap_future(future)
        return Scored(compiled, dict(job.scores), job.processed_tokens, job.floor_cached, tuple(job.placements))

    @property
    def codes(self) -> tuple[str, ...]:
        """A decision model's codes (its head's labels, what a question reads); empty for a vocabulary model."""
        return self.context.codes

    async def warm_up(self) -> Scored:
        """Compile and run one small request: the first pass pays for lazy initialisation, not a user."""
        return await self.score(await self.compile_async(warmup_request(self.codes)))

    async def read_prompts(self, prompts: Sequence[Sequence[int]], top: int) -> list[PromptScores]:
        """Every prompt's token logprobs and `top` most likely next tokens (prompt_logprobs.py), its passes shared
        with other completions' prompts. Refused at once (`ContentTooLong`) for a prompt longer than a pass holds;
        if the awaiting task is cancelled (the client left), its prompts not yet in a pass are dropped."""
        prompt_program(prompts, self.model.name, self.shapes.budget, self.shapes.prompt_block,
                       largest=self.shapes.largest)  # the one check: every prompt fits a pass
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            raise EngineClosed("the engine is shut down")
        self.scheduler.add(PromptRead([tuple(p) for p in prompts], top, future))
        try:
            return (await asyncio.wrap_future(future)).scores
        except asyncio.CancelledError:
            future.cancel()
            raise

    def generate(self, steps, max_tokens: int) -> Generating:
        """Queue a generation (`generate.generating`'s steps, at most `max_tokens`): it draws a token at a time, in
        turn with the passes and the other generations (turns.py). Its future resolves to the `Generation`, or
        raises what the model raised or `Cancelled`; cancelling it stops the generation before its next token."""
        generating = Generating(steps, concurrent.futures.Future(), max_tokens)
        if self._closed:
            generating.fail(Cancelled("the server is shutting down"))
        else:
            self.scheduler.add(generating)
        return generating

    # ---- the worker thread -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while (work := self.scheduler.schedule()) is not None:
            try:
                self.scheduler.deliver(work, self.run(work))
            except Exception:  # the loop must survive anything; the requests involved were told already
                log.exception("engine loop error")
                self.scheduler.flights.clear()
        self.scheduler.close()

    def run(self, work):
        """Run one piece of work: launch a pass (and collect it at once where launches are synchronous), collect the
        pass in flight, run a decode slice, a prompt pass or a generation's step; a `Failed` where it raised. A wait
        is the scheduler's."""
        try:
            if isinstance(work, Pass):
                pending = self._launch(work)
                return Launched(pending, None if self.scheduler.overlap else self.runner.collect(pending))
            if isinstance(work, Collect):
                return Launched(work.flight.pending, self.runner.collect(work.flight.pending))
            if isinstance(work, DecodeSlice):
                return work.decoding.advance(work.enough) if work.decoding.wanted() else True
            if isinstance(work, PromptPass):
                stack, lock = stack_of(self.model)  # `hidden` runs eagerly on the stack, under the model's lock
                return score_prompts(stack, work.program, work.top, lock)
            if isinstance(work, GenerateStep):
                return work.generating.step()
            return None
        except Exception as error:
            return Failed(error)

    def _launch(self, work: Pass):
        """Launch a pass: contents read before from the content cache, its keys and values kept where it extracts
        or where a content is to be cached (eagerly), else through the fixed shapes."""
        units = work.units
        arrays = [unit.arrays for unit in units]
        keys, entries = self.contents.lookup(units)
        cache = {"cached": entries} if any(e is not None for e in entries) else {}
        if work.extracts:
            pending = self.runner.launch_keeping_kv(arrays, work.extraction_rows, **cache)
        elif cache or self.contents.wants(keys, entries):
            pending = self.runner.launch(arrays, **cache, record=True)
        else:
            pending = self.runner.launch(arrays)
        recorded, pending.recorded = getattr(pending, "recorded", None), None
        try:
            self.contents.store(units, keys, entries, pending.starts, recorded)
        except Exception:  # a content not kept is read again next time; the pass's scores stand
            log.exception("the content cache could not keep a pass's contents")
        pending.started = time.perf_counter()
        pending.index = self.stats.passes
        self.stats.passes += 1
        return pending

