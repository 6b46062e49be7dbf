"""The engine: owns the model, its tokenizer and the pass shapes; compiles requests and runs every request's
contents in shared passes.

    compile  (a compile thread)  body -> frontend -> compiler.compile(program, ctx, until="segment") -> `Segment`s,
                                 one per content and the floor (the same driver `spinfc compile` runs; intake.py)
    submit   (any thread)        a compiled request joins the queue; returns a future of its scores
    worker   (one thread)        loop: schedule (its `Scheduler`, scheduler.py: the next pass from the oldest work,
                                 the size it launches at, whether it waits for more) / run (the runner stages and
                                 launches it) / postprocess (the pass before it: its scores to their requests)

A pass holds segments of any number of requests; a segment's rows are the same wherever it lands (scheduler.py),
so a content's results never depend on its neighbours. On CUDA the runner's launch returns at once, so pass k+1
is scheduled and staged while pass k runs, and pass k's results are assembled while pass k+1 runs.

The floor (the questions on empty content) is run once per
question set and cached: a request whose floor is cached, or already queued by another request, reuses it. A
content read before comes from the content cache (its keys and values; runtime/content_cache.py, cached_rows.py):
only its questions' rows run. A pass
that raises is retried with each of its segments alone, so only the request whose segment fails gets the error.

A pass with extraction questions keeps its keys and values; its decode (`Decoding`) then runs a slice at a time
(`_decode_turn`), in turn with the scoring passes that other requests queue and with the decodes of other passes:
up to `decodes_at_once` passes' decodes take turns (their beams within one shared memory budget; on CUDA each in a
lane of the device's fixed buffers, extract/fixed.py), so a short extraction behind a long one waits a slice of it per slice of its
own, not its end. Passes of extraction work wait only while that many decode. A decode whose requests are all
withdrawn stops within one launch, and a withdrawn request's walkers are dropped at the next.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import queue
import threading
import time

import numpy as np
from collections import OrderedDict
from collections.abc import Callable

from spinfc.ir.nodes import Program
from spinfc.passes import PassContext
from spinfc.passes.plan_packing import floor_first
from spinfc.runtime.cached_rows import PassCache
from spinfc.runtime.compiled import Compiled, Refused, Scored  # noqa: F401 (Refused re-exported)
from spinfc.runtime.content_cache import ContentCache
from spinfc.runtime.extract.budget import DecodeMemory, decode_work
from spinfc.runtime.extract.scheduling import (Decoding, decodes_at_once, extraction_prompt_rows, extracts,
                                               floors_first, free_lane)
from spinfc.runtime.intake import Intake
from spinfc.runtime.results import ContentScores
from spinfc.runtime.runner import Pending, Runner
from spinfc.runtime.scheduler import FULL, EngineStats, Job, Scheduler, Unit  # noqa: F401 (FULL re-exported)
from spinfc.shapes import Shapes

log = logging.getLogger("spinfc.engine")

# Where shapes are fixed, how long the first pass after a quiet spell (nothing queued, nothing running) waits for a
# request to start arriving when it would launch mostly empty and none is on its way: requests sent together reach
# the server a few milliseconds apart, and a pass launched with the first alone can cost a larger last pass.
LINGER = 0.005
# An extraction decode runs in slices while scoring work or another decode waits: each slice as long as the last
# pass took (at least this), so a score or a decode behind it waits about a pass per slice, not the whole decode.
DECODE_SLICE = 0.02

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


class PassFailed(Exception):
    """The forward pass holding this request's content raised; the message carries the original error."""


class EngineClosed(Exception):
    """The engine stopped before this request ran."""


_NONE = object()  # `_admit` was handed no job


class Engine:
    def __init__(self, model, shapes: Shapes, *, device: str = "cpu", tokenizer=None, floor_cache_size: int = 256,
                 on_pass: Callable[[int, int, float], None] | None = None, content_cache_tokens: int | None = None,
                 media=None):
        """`model.forward(launch) -> [N] logprobs` (a stack, or a GraphedModel of `shapes` on CUDA); `shapes` the
        pass shapes chosen at start-up (`Shapes.for_device`); `tokenizer` the model's (default: `model.tokenizer`);
        `on_pass(tokens_used, rows_launched, seconds)` is called after each pass (metrics); `content_cache_tokens`
        the content cache's budget (`content_cache.py`; None: its default for the device, 0: off)."""
        self.model = model
        self.shapes = shapes
        self.device = device
        self.tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        # `media`: what reads a content's media (towers.MediaReader); None refuses media
        # a decision model's codes (its head's labels): what tokenize reads a question's code slot as
        self.context = PassContext(tokenizer=self.tokenizer, shapes=shapes, media=media,
                                   codes=getattr(model, "codes", ()))
        self.scheduler = Scheduler(shapes)  # what the next pass holds, its launch size, and whether it waits
        self.runner = Runner(model, shapes, device, pad=self.tokenizer.pad_token_id or 0)
        self.on_pass = on_pass
        self.stats = EngineStats()
        self.contents = PassCache(ContentCache.for_model(model, device, content_cache_tokens))
        self._floor_cache: OrderedDict[str, ContentScores] = OrderedDict()
        self._floor_cache_size = floor_cache_size
        self._inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._units: list[Unit] = []  # waiting work, oldest first
        self._floors_queued: dict[str, Unit] = {}
        self._ended: tuple | None = None  # a pass collected, its scores held back until the next pass is launched
        self._quiet = True  # nothing was queued or running when the work now queued arrived (LINGER)
        # the decodes of extraction passes, taking turns a slice each (the next in turn first), at most `_decode_limit`
        self._decodings: collections.deque[Decoding] = collections.deque()
        self._decode_limit = decodes_at_once(model, device)
        self._decode_memory = DecodeMemory()  # what their beams hold together
        self._pass_seconds = 0.0  # how long the last pass took (a decode slice's length)
        self.intake = Intake(model, self.context)
        # the compile side's entry points (runtime/intake.py), on the engine as every caller knows them
        self.compile, self.compile_program = self.intake.compile, self.intake.compile_program
        self.compile_async, self.compile_program_async = self.intake.compile_async, self.intake.compile_program_async
        self._worker = threading.Thread(target=self._loop, name="spinfc-engine", daemon=True)
        self._closed = False

    @property
    def codes(self) -> tuple[str, ...]:
        """A decision model's codes (its head's labels, what a question reads); empty for a vocabulary model."""
        return self.context.codes

    # ---- the caller's side --------------------------------------------------------------------------------

    def start(self) -> "Engine":
        self._worker.start()
        return self

    def close(self) -> None:
        """Stop the worker after the pass in flight; requests still waiting fail with EngineClosed."""
        if not self._closed:
            self._closed = True
            self._inbox.put(None)
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
        self._inbox.put(Job(compiled=compiled, future=future))
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

    async def warm_up(self) -> Scored:
        """Compile and run one small request: the first pass pays for lazy initialisation, not a user."""
        return await self.score(await self.compile_async(warmup_request(self.codes)))

    # ---- the worker thread -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        in_flight: tuple[list[Unit], Pending] | None = None  # launched, not yet collected (CUDA)
        while True:
            try:
                if self._decodings:
                    if in_flight is not None:  # the decode has the device to itself between passes
                        self._postprocess(*in_flight)
                        in_flight = None
                    self._decode_turn()
                idle = not self._units and in_flight is None and self._ended is None and not self._decodings
                self._quiet = self._quiet or idle
                if not self._admit(block=idle):
                    break
                self._units = [u for u in self._units if u.wanted() or self._forget(u)]
                # While a pass runs, the next is launched behind it only if it is full (the worker watches the
                # arrivals while it runs: a pass they fill goes behind it at once); a part-filled one waits for the
                # pass in flight to end, so requests arriving meanwhile fill it, and is launched before that
                # pass's scores are delivered (the GPU waits for no results). On an idle GPU a pass waits for
                # arriving requests only while it would launch mostly empty at its launch size (the first pass after
                # a quiet spell: LINGER, even before any is seen arriving).
                lingers = self._quiet and self.shapes.fixed
                if in_flight is None and self._units and (self.intake.expecting or lingers) and \
                        not self._decodings and not self.scheduler.full(self._units, of_launch=True):
                    self._deliver_ended()  # answers first: a gather may wait half a pass
                    self._gather(linger=lingers)
                units = self._schedule(full_only=in_flight is not None) if self._units else None
                launched = self._run(units) if units else None
                self._quiet = self._quiet and launched is None
                self._deliver_ended()
                if in_flight is not None:
                    if launched is None and self._fills_behind(in_flight[1]):
                        continue  # arrivals filled a pass while this one runs: it is launched behind it
                    self._ended = self._collect(*in_flight)
                    self._admit_arrived()  # what arrived while it ran, before deciding
                    # delivered after the launch that waited for it, unless none waits (or it extracts: the
                    # decode needs the GPU to itself)
                    if launched is not None or not self._units or in_flight[1].kept is not None:
                        self._deliver_ended()
                in_flight = launched
                if in_flight is not None and not self.runner.asynchronous:
                    self._postprocess(*in_flight)
                    in_flight = None
            except Exception:  # the loop must survive anything; the requests involved were told already
                log.exception("engine loop error")
                in_flight = None
        self._deliver_ended()
        if in_flight is not None:
            self._postprocess(*in_flight)
        while self._decodings:  # stopped where they are: their requests are told
            decoding = self._decodings.popleft()
            decoding.close()
            self._units += decoding.units
        for unit in self._units:
            unit.fail(EngineClosed("the engine shut down before this request ran"))
        self._units = []
        while True:  # jobs submitted while close() was running
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.fail(EngineClosed("the engine shut down before this request ran"))

    def _admit(self, block: bool, first=_NONE) -> bool:
        """Turn queued jobs (`first`, taken off the inbox already, then the inbox's) into units; False once close()
        was called."""
        try:
            job = first if first is not _NONE else self._inbox.get(block=block)
        except queue.Empty:
            return True
        while job is not None:
            if not job.done:
                try:
                    self._admit_job(job)
                except Exception as error:  # the job's units (if any) are dropped once it is done
                    log.exception("a request could not be admitted")
                    job.fail(PassFailed(f"the request could not be queued: {type(error).__name__}: {error}"))
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                return True
        return False

    def _admit_arrived(self, first=_NONE) -> bool:
        """`_admit` of what has arrived, without waiting, from inside a turn of the loop; False once close() was
        called, with its mark put back for the loop's own `_admit` to see."""
        if self._admit(block=False, first=first):
            return True
        self._inbox.put(None)
        return False

    def _admit_job(self, job: Job) -> None:
        compiled = job.compiled
        key = compiled.floor_key
        inputs = [self._unit(compiled, c, job) for c in compiled.inputs]
        if not floor_first(compiled.program):  # the inputs, then the floor: the queue order `--emit plan` shows
            self._units.extend(inputs)
        cached = self._floor_cache.get(key)
        if cached is not None:
            self._floor_cache.move_to_end(key)
            self.stats.floor_hits += 1
            job.floor_cached = True
            job.scores[compiled.floor] = cached
        elif key in self._floors_queued:
            self.stats.floor_hits += 1
            self._floors_queued[key].consumers.append((job, compiled.floor))
        else:
            self.stats.floor_misses += 1
            unit = self._unit(compiled, compiled.floor, job, key)
            self._floors_queued[key] = unit
            self._units.append(unit)
        if floor_first(compiled.program):  # extraction reads the floor's contexts: the floor runs first
            self._units.extend(inputs)
        job.remaining = len(compiled.segments) - len(job.scores)
        if job.remaining == 0:
            job.finish()

    def _unit(self, compiled: Compiled, content: int, job: Job, key: str | None = None) -> Unit:
        segment = compiled.segments[content]
        job.processed_tokens += segment.length
        decode = decode_work(compiled.program, 1) if compiled.extracts and key is None else 0
        with self.stats.lock:
            self.stats.queued_tokens += segment.length
            self.stats.queued_decode += decode
        return Unit(segment, compiled.arrays[content], compiled.score_map, [(job, content)], floor_key=key,
                    decode=decode)

    def _forget(self, unit: Unit) -> bool:
        if unit.floor_key is not None and self._floors_queued.get(unit.floor_key) is unit:
            del self._floors_queued[unit.floor_key]
        with self.stats.lock:
            self.stats.queued_tokens -= unit.segment.length
            self.stats.queued_decode -= unit.decode
        return False

    # ---- schedule / run / postprocess ------------------------------------------------------------------------

    def _schedule(self, full_only: bool = False) -> list[Unit] | None:
        """The units of the next pass, taken off the queue; with `full_only`, None unless they fill FULL of the
        budget (or the answer rows or reads) — the pass would otherwise run part-empty."""
        chosen = self._chosen()
        if full_only and not self.scheduler.full([self._units[i] for i in chosen]):
            return None
        taken = set(chosen)
        units = [self._units[i] for i in chosen]
        self._units = [unit for i, unit in enumerate(self._units) if i not in taken]
        return units

    def _chosen(self) -> list[int]:
        """The indices of the queued units the next pass would hold (while `_decode_limit` decodes run, none that
        extracts: its decode would wait for one of theirs to end)."""
        if self._decode_room():
            return floors_first(self._units, self.scheduler.next_pass(self._units)) if self._units else []
        free = [i for i, unit in enumerate(self._units) if not extracts(unit)]
        return [free[k] for k in self.scheduler.next_pass([self._units[i] for i in free])] if free else []

    def _decode_room(self) -> bool:
        """Whether one more pass's decode may start now."""
        return len(self._decodings) < self._decode_limit

    def _waiting_work(self) -> bool:
        """Whether anything waits for the device besides the decode whose turn it is (the first): another decode, a
        request arriving, or a queued unit the next pass could hold."""
        return len(self._decodings) > 1 or not self._inbox.empty() or \
            any(self._decode_room() or not extracts(unit) for unit in self._units)

    def _decode_turn(self) -> None:
        """The next decode in turn runs for a slice: until it ends, or, while other work waits (`_waiting_work`),
        for as long as the last pass took (DECODE_SLICE at least), or until the memory its next group needs is held
        by the others; then it goes to the back of the turn. A decode nobody waits for any more is stopped."""
        decoding = self._decodings[0]
        length = max(DECODE_SLICE, self._pass_seconds)

        def enough(seconds: float) -> bool:
            if not decoding.wanted():
                return True
            return seconds >= length and self._waiting_work()

        if decoding.wanted() and not decoding.advance(enough) and decoding.wanted():
            self._decodings.rotate(-1)  # a slice done, more to decode: the next one's turn
            return
        self._decodings.popleft()
        self._decode_ended(decoding)

    def _decode_ended(self, decoding: Decoding) -> None:
        """A decode that ended (or was withdrawn): its units' scores (or its error) go to their requests."""
        if not decoding.done:  # withdrawn
            decoding.close()
        error = decoding.error
        for unit, unit_scores in zip(decoding.units, decoding.results()):
            if error is not None:
                self._forget(unit)
                unit.fail(PassFailed(f"extraction failed: {type(error).__name__}: {error}"))
            elif unit_scores is not None and unit.wanted():
                self._deliver(unit, unit_scores)
            else:
                self._forget(unit)

    def _fills_behind(self, pending: Pending) -> bool:
        """While the pass `pending` runs: wait for it to end or for arrivals to fill the next pass, whichever comes
        first; True for the second. Filled means more is queued than the next pass holds, and what it holds is
        FULL (so `_schedule(full_only=True)` launches it behind the running one): until then waiting costs nothing,
        since a pass launched behind starts only when the running one ends. Polled each millisecond: the queue,
        and the pass's end."""
        def filled() -> bool:
            chosen = self._chosen()
            return len(chosen) < len(self._units) and self.scheduler.full([self._units[i] for i in chosen])

        full = filled()
        while not full and not self.runner.done(pending):
            try:
                job = self._inbox.get(timeout=0.001)
            except queue.Empty:
                continue
            if not self._admit_arrived(job):
                return False
            full = filled()
        return full and not self.runner.done(pending)

    def _gather(self, linger: bool = False) -> None:
        """The GPU is idle and the next pass would launch part-empty at its launch size while requests are still
        arriving (parsed, compiling, or compiled and not yet submitted): wait for them (where shapes are fixed,
        while one more content would still run in the launch size the pass takes now: runtime/gather.py), up to
        half a pass's time as measured (of that size). A pass costs what its launch size costs, full or part-empty,
        so such a wait costs no rows and is paid back whenever it lets the pass hold more. With `linger`, wait up to
        LINGER for a request to start arriving even while none is."""
        now = time.perf_counter()
        deadline = now + self.scheduler.longest_wait(self._units, self.stats.rate)
        lingering = now + (LINGER if linger else 0.0)
        while (self.intake.expecting or time.perf_counter() < lingering) and \
                self.scheduler.waits_for_more(self._units) and time.perf_counter() < deadline:
            try:
                job = self._inbox.get(timeout=max(0.0, min(0.005, deadline - time.perf_counter())))
            except queue.Empty:
                continue
            if not self._admit_arrived(job):  # it, then whatever else came, in order
                return

    def _run(self, units: list[Unit]) -> tuple[list[Unit], Pending] | None:
        """Launch the pass of `units`; a launch that raises puts them back to be run one by one."""
        try:
            arrays = [unit.arrays for unit in units]
            keys, entries = self.contents.lookup(units)  # contents read before come from the content cache
            cache = {"cached": entries} if any(e is not None for e in entries) else {}
            if any(map(extracts, units)):  # the pass's keys and values are kept for the decode (run eagerly)
                pending = self.runner.launch_keeping_kv(arrays, [extraction_prompt_rows(unit) for unit in units],
                                                        **cache)
            elif cache or self.contents.wants(keys, entries):  # run eagerly, its keys and values recorded
                pending = self.runner.launch(arrays, **cache, record=True)
            else:
                pending = self.runner.launch(arrays)
        except Exception as error:
            self._failed(units, error)
            return None
        recorded, pending.recorded = getattr(pending, "recorded", None), None
        try:
            self.contents.store(units, keys, entries, pending.starts, recorded)
        except Exception:  # a content not kept is read again next time; the pass's scores stand
            log.exception("the content cache could not keep a pass's contents")
        pending.started = time.perf_counter()
        pending.index = self.stats.passes
        self.stats.passes += 1
        return units, pending

    def _failed(self, units: list[Unit], error: Exception) -> None:
        if len(units) > 1:  # find the culprit: run each alone, ahead of newer work
            log.warning("a pass of %d contents failed (%r); retrying each alone", len(units), error)
            for unit in units:
                unit.solo = True
            self._units = units + self._units
            return
        log.exception("a pass failed", exc_info=error)
        self._forget(units[0])
        units[0].fail(PassFailed(f"the forward pass failed: {type(error).__name__}: {error}"))

    def _postprocess(self, units: list[Unit], pending: Pending) -> None:
        """Collect a launched pass and deliver each unit's scores."""
        ended = self._collect(units, pending)
        if ended is not None:
            self._deliver_pass(*ended)

    def _deliver_ended(self) -> None:
        """Deliver the pass collected and held back for the next launch (`_ended`), if any: once, even if it raises."""
        ended, self._ended = self._ended, None
        if ended is not None:
            self._deliver_pass(*ended)

    def _collect(self, units: list[Unit], pending: Pending) -> tuple | None:
        """Wait for a launched pass: (units, pending, logprobs), or None where it failed (its units are told)."""
        try:
            logprobs = self.runner.collect(pending)
        except Exception as error:
            self._failed(units, error)
            return None
        seconds = time.perf_counter() - pending.started
        self._pass_seconds = seconds
        used = sum(unit.segment.length for unit in units)
        self.stats.rows_used += used
        self.stats.rows_total += pending.rows
        self.stats.reads += pending.reads
        self.stats.observe_pass(pending.rows, seconds)
        if self.on_pass is not None:
            try:  # an observer (metrics) that fails must not turn a good pass into a failed one
                self.on_pass(used, pending.rows, seconds)
            except Exception:
                log.exception("the on_pass observer failed")
        return units, pending, logprobs

    def _deliver_pass(self, units: list[Unit], pending: Pending, logprobs: np.ndarray) -> None:
        """Each unit's scores of a collected pass (`_collect`'s) to its requests."""
        offset, scores = 0, []
        for unit, start in zip(units, pending.starts):
            n = len(unit.arrays.read_row)
            for job, content in unit.consumers:
                job.placements.append((pending.index, content, start, unit.segment.length))
            scores.append(self._scores(unit, logprobs[offset:offset + n]))
            offset += n
        if pending.kept is not None:  # its extraction units wait for their decode; the others are answered now
            decoded = [k for k, unit in enumerate(units) if extracts(unit) and scores[k] is not None]
            if decoded:
                while not self._decode_room():  # a pass launched behind a full turn (CUDA): turns until one ends
                    self._decode_turn()
                self._decodings.append(Decoding(
                    self.model, [units[k] for k in decoded], [scores[k] for k in decoded],
                    [pending.starts[k] for k in decoded], pending.kept, self.stats, self._decode_memory,
                    free_lane(self._decodings)))
                held = set(decoded)
                units = [unit for k, unit in enumerate(units) if k not in held]
                scores = [unit_scores for k, unit_scores in enumerate(scores) if k not in held]
        for unit, unit_scores in zip(units, scores):
            if unit_scores is not None:
                self._deliver(unit, unit_scores)

    def _scores(self, unit: Unit, logprobs) -> ContentScores | None:
        """The unit's option scores from its reads' logprobs; None (and the unit failed) when they do not add up, or
        when one is not finite (a half-precision product overflowed: never reported as a score)."""
        if not np.isfinite(logprobs).all():
            log.error("a pass returned non-finite logprobs (%s)", getattr(self.model, "scheme", "?"))
            self._forget(unit)
            unit.fail(PassFailed(
                f"the model's scores overflowed in {getattr(self.model, 'scheme', 'its dtype')} on this content: "
                "start the server with --dtype bfloat16 (or float32), whose range holds it, and send it again"))
            return None
        try:
            return unit.score_map.scores(logprobs)
        except Exception as error:
            log.exception("results of a pass could not be assembled")
            self._forget(unit)
            unit.fail(PassFailed(f"results could not be assembled: {error}"))
            return None

    def _deliver(self, unit: Unit, scores: ContentScores) -> None:
        self._forget(unit)
        if unit.floor_key is not None:
            self._floor_cache[unit.floor_key] = scores
            while len(self._floor_cache) > self._floor_cache_size:
                self._floor_cache.popitem(last=False)
        unit.deliver(scores)

