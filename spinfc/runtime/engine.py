"""The engine: owns the model, compiles requests, and runs every request's contents in shared passes.

    compile  (a compile thread)  body -> frontend -> passes -> `Segment`s, one per content and the floor
    submit   (any thread)        a compiled request joins the queue; returns a future of its scores
    worker   (one thread)        loop: admit new work, fill one pass first-fit from the oldest work, run it, deliver

A pass holds segments of any number of requests; a segment's rows are the same wherever it lands (scheduler.py),
so a content's results never depend on its neighbours. The floor (the questions on empty content) is run once per
question set and cached: a request whose floor is cached, or already queued by another request, reuses it. A pass
that raises is retried with each of its segments alone, so only the request whose segment fails gets the error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import attrs
import torch

from spinfc.ir.nodes import Program
from spinfc.runtime import extract
from spinfc.runtime.results import ContentScores, QueryResult, content_scores, query_results
from spinfc.runtime.scheduler import (
    EngineStats, Job, PassShape, Segment, Unit, assemble, cut_segments, fill, floor_key,
)

log = logging.getLogger("spinfc.engine")

WARMUP_REQUEST = {
    "messages": [{"role": "user", "content": "Customer message: the parcel arrived broken."}],
    "scoring": {"queries": [{"id": "warmup", "template": "\n\nIs the customer unhappy?\nAnswer:<?>",
                             "options": [" yes", " no"]}]},
}


class Refused(Exception):
    """A request the engine will not run, with an error code, a message saying what to do, and the field at fault."""

    def __init__(self, code: str, message: str, param: str | None = None):
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


class PassFailed(Exception):
    """The forward pass holding this request's content raised; the message carries the original error."""


class EngineClosed(Exception):
    """The engine stopped before this request ran."""


@attrs.frozen
class Compiled:
    """A request compiled against the engine's model and pass shape."""

    program: Program  # after every pass
    segments: tuple[Segment, ...]  # one per content, the floor included
    floor: int  # index of the floor content in program.contents
    inputs: tuple[int, ...]  # indices of the request's own contents, in request order


@attrs.frozen
class Scored:
    compiled: Compiled
    scores: dict[int, ContentScores]  # content index -> [question][option] logprob
    processed_tokens: int  # rows this request put into passes (a reused floor costs none)
    floor_cached: bool

    def results(self) -> list[list[QueryResult]]:
        """Per input (request order), per query: the seed's result shape."""
        program, floor = self.compiled.program, self.scores[self.compiled.floor]
        return [query_results(program, self.scores[c], floor) for c in self.compiled.inputs]


class Engine:
    def __init__(self, model, *, budget: int, block: int = 128, device: str = "cpu", floor_cache_size: int = 256,
                 max_rows: int | None = None, max_reads: int | None = None, trim: bool | None = None,
                 on_pass: Callable[[int, int, float], None] | None = None):
        """`model.forward(launch) -> [N] logprobs` (a stack, or a GraphedModel on CUDA); `budget` rows per pass,
        contents at multiples of `block`; `max_rows`/`max_reads` fix the answer shapes (a GraphedModel's
        LaunchShape); `trim` (default: on the CPU) launches only the blocks a pass uses instead of the whole
        budget; `on_pass(tokens_used, rows_launched, seconds)` is called after each pass (metrics)."""
        self.model = model
        self.on_pass = on_pass
        self.device = device
        trim = str(device).startswith("cpu") if trim is None else trim
        self.shape = PassShape(budget=budget, block=block, max_rows=max_rows, max_reads=max_reads, trim=trim)
        self.stats = EngineStats()
        self._floor_cache: OrderedDict[str, ContentScores] = OrderedDict()
        self._floor_cache_size = floor_cache_size
        self._inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._units: list[Unit] = []  # waiting work, oldest first
        self._floors_queued: dict[str, Unit] = {}
        self._compiler = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spinfc-compile")
        self._worker = threading.Thread(target=self._loop, name="spinfc-engine", daemon=True)
        self._closed = False

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
            self._compiler.shutdown(wait=False, cancel_futures=True)

    def compile(self, body: dict, check: Callable[[Program], None] | None = None) -> Compiled:
        """Compile a /v1/score body. `check(program)` sees the program once tokenized and deduplicated (before it
        is packed and laid out) and may raise to refuse it (the server's limits). Raises CompileError (from the
        frontend, the passes or `check`) or Refused."""
        from spinfc.frontend import program_from_request

        return self.compile_program(program_from_request(body, model=self.model.name), check)

    def compile_program(self, program: Program, check: Callable[[Program], None] | None = None) -> Compiled:
        """Compile a program the frontend built (a request's queries, a pack's, or both), as `compile` does."""
        from spinfc.passes import PIPELINE

        program = attrs.evolve(program, budget=self.shape.budget, block=self.shape.block)
        for name, transform in PIPELINE:
            program = transform(program)
            if name == "dedupe-prefixes" and check is not None:
                check(program)
        by_content = {segment.content: segment for segment in cut_segments(program.layouts)}
        floors = [i for i, content in enumerate(program.contents) if content.is_floor]
        if len(floors) != 1 or set(by_content) != set(range(len(program.contents))):
            raise ValueError(f"compiled program has floors {floors} and laid out contents {sorted(by_content)}")
        segments = tuple(by_content[i] for i in range(len(program.contents)))
        for segment in segments:
            if not self.shape.admits(segment):
                raise Refused("content_too_long", f"a content with its questions needs {segment.length} rows and "
                              f"{segment.rows} answer rows: more than one pass holds ({self.shape})")
        inputs = tuple(i for i in range(len(program.contents)) if i != floors[0])
        return Compiled(program=program, segments=segments, floor=floors[0], inputs=inputs)

    async def compile_async(self, body: dict, check: Callable[[Program], None] | None = None) -> Compiled:
        """`compile` on the engine's compile thread, off the event loop (tokenizers are not shared across threads)."""
        return await asyncio.get_running_loop().run_in_executor(self._compiler, self.compile, body, check)

    async def compile_program_async(self, program: Program, check: Callable[[Program], None] | None = None) -> Compiled:
        """`compile_program` on the engine's compile thread."""
        return await asyncio.get_running_loop().run_in_executor(self._compiler, self.compile_program, program, check)

    def submit(self, compiled: Compiled) -> concurrent.futures.Future:
        """Queue a compiled request; the future resolves to its `Job` or raises PassFailed / EngineClosed.
        Cancelling the future withdraws the request: its contents not yet run are dropped."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            future.set_exception(EngineClosed("the engine is shut down"))
            return future
        with self.stats.lock:
            self.stats.queued += 1
        future.add_done_callback(self.stats.settled)
        self._inbox.put(Job(compiled=compiled, future=future))
        return future

    async def score(self, compiled: Compiled) -> Scored:
        """Run a compiled request in shared passes; raises PassFailed or EngineClosed."""
        job = await asyncio.wrap_future(self.submit(compiled))
        return Scored(compiled, dict(job.scores), job.processed_tokens, job.floor_cached)

    async def warm_up(self) -> Scored:
        """Compile and run one small request: the first pass pays for lazy initialisation, not a user."""
        return await self.score(await self.compile_async(WARMUP_REQUEST))

    # ---- the worker thread -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                if not self._admit(block=not self._units):
                    break
                self._units = [u for u in self._units if u.wanted() or self._forget(u)]
                if self._units:
                    self._run_one_pass()
            except Exception:  # the loop must survive anything; the requests involved were told already
                log.exception("engine loop error")
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

    def _admit(self, block: bool) -> bool:
        """Turn queued jobs into units; False once close() was called."""
        try:
            job = self._inbox.get(block=block)
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

    def _admit_job(self, job: Job) -> None:
        compiled = job.compiled
        questions = compiled.program.questions
        key = floor_key(self.model, compiled.program, compiled.floor)
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
            unit = Unit(compiled.segments[compiled.floor], questions, [(job, compiled.floor)], floor_key=key)
            self._floors_queued[key] = unit
            self._units.append(unit)
            job.processed_tokens += unit.segment.length
        for c in compiled.inputs:
            self._units.append(Unit(compiled.segments[c], questions, [(job, c)]))
            job.processed_tokens += compiled.segments[c].length
        job.remaining = len(compiled.segments) - len(job.scores)
        if job.remaining == 0:
            job.finish()

    def _forget(self, unit: Unit) -> bool:
        if unit.floor_key is not None and self._floors_queued.get(unit.floor_key) is unit:
            del self._floors_queued[unit.floor_key]
        return False

    def _run_one_pass(self) -> None:
        if self._units[0].solo:
            chosen = [0]
        else:
            candidates = [i for i, unit in enumerate(self._units) if not unit.solo]
            chosen = [candidates[k] for k in fill([self._units[i].segment for i in candidates], self.shape)]
            chosen = chosen or [0]  # compile admits only segments that fit a pass; if one does not, it fails alone
        units = [self._units[i] for i in chosen]
        units, chosen = self._floors_first(units, chosen)
        taken = set(chosen)
        self._units = [unit for i, unit in enumerate(self._units) if i not in taken]
        try:
            logprobs, kept = self._forward([unit.segment for unit in units], keep_kv=any(map(_extracts, units)))
        except Exception as error:
            if len(units) > 1:  # find the culprit: run each alone, ahead of newer work
                log.warning("a pass of %d contents failed (%r); retrying each alone", len(units), error)
                for unit in units:
                    unit.solo = True
                self._units = units + self._units
                return
            log.exception("a pass failed")
            self._forget(units[0])
            units[0].fail(PassFailed(f"the forward pass failed: {type(error).__name__}: {error}"))
            return
        offset, scores = 0, []
        for unit in units:
            n = len(unit.segment.reads)
            scores.append(self._scores(unit, logprobs[offset:offset + n]))
            offset += n
        if kept is not None:
            scores = self._extract(units, scores, kept)
        for unit, unit_scores in zip(units, scores):
            if unit_scores is not None:
                self._deliver(unit, unit_scores)

    def _forward(self, segments: list[Segment], keep_kv: bool = False):
        """Run one pass of `segments`: one logprob per read, in segment order, and with `keep_kv` the pass's keys
        and values for extraction (`extract.PassKV`; else None)."""
        from spinfc.backend.launch import lower

        started = time.perf_counter()
        layout = assemble(segments, self.shape, index=self.stats.passes)
        launch = lower(layout, rows_padded_to=self.shape.max_rows, reads_padded_to=self.shape.max_reads)
        kept = None
        with torch.inference_mode():
            if keep_kv:
                launch = launch.to(self.device)
                out, keys, values = extract.forward_keeping_kv(self.model, launch)
                kept = extract.PassKV(launch.tokens.cpu(), launch.positions.cpu(), launch.ends.cpu(), tuple(keys),
                                      tuple(values), layout)
            else:
                out = self.model.forward(launch.to(self.device))  # [N] float32 (N padded to max_reads when fixed)
        n, used = len(layout.reads), sum(segment.length for segment in segments)
        logprobs = out[:n].float().cpu().tolist()
        self.stats.passes += 1
        self.stats.rows_used += used
        self.stats.rows_total += layout.budget
        self.stats.reads += n
        if self.on_pass is not None:
            try:  # an observer (metrics) that fails must not turn a good pass into a failed one
                self.on_pass(used, layout.budget, time.perf_counter() - started)
            except Exception:
                log.exception("the on_pass observer failed")
        return logprobs, kept

    # ---- extraction: the pass's K/V handed to the decode, and its results put into the scores ---------------

    def _floors_first(self, units: list[Unit], chosen: list[int]) -> tuple[list[Unit], list[int]]:
        """Floors ahead of contents in the pass (a content's extraction reads its floor's contexts), and contents
        with extraction questions whose floor has not run and is not in this pass left for a later pass (the
        floor is queued ahead of them, so it runs first)."""
        def floor_ready(unit: Unit) -> bool:
            job = unit.consumers[0][0]
            floor = job.compiled.floor
            return floor in job.scores or any((job, floor) in other.consumers for other in units)

        pairs = [(u, i) for u, i in zip(units, chosen) if u.floor_key is not None or not _extracts(u)
                 or floor_ready(u)]
        pairs.sort(key=lambda pair: pair[0].floor_key is None)
        if not pairs:  # cannot happen while floors are queued ahead; run as chosen rather than stall
            pairs = list(zip(units, chosen))
        return [u for u, _ in pairs], [i for _, i in pairs]

    def _extract(self, units: list[Unit], scores: list, kept) -> list:
        """Decode every extraction question of the pass in one batch and put the results into each unit's scores
        (a unit whose extraction fails is failed and gets None)."""
        items = []
        for k, unit in enumerate(units):
            job, _ = unit.consumers[0]
            floor_unit = next((k2 for k2, other in enumerate(units) if other.floor_key is not None and
                               (job, job.compiled.floor) in other.consumers), None)
            start = kept.layout.spans[k][0]
            items.append(extract.PassItem(
                questions=unit.questions, start=start,
                prompt_rows=tuple(attrs.evolve(p, row=p.row + start) for p in unit.segment.prompt_rows),
                is_floor=unit.floor_key is not None,
                floor=None if unit.floor_key is not None or floor_unit is not None else job.scores.get(
                    job.compiled.floor),
                floor_item=floor_unit if unit.floor_key is None else None,
            ))
        try:
            entries, walked = extract.extract_pass(self.model, kept, items)
            self.stats.decode_steps += walked.steps
            self.stats.decode_rows += walked.beam_rows
        except Exception as error:
            log.exception("extraction failed")
            for unit in units:
                self._forget(unit)
                unit.fail(PassFailed(f"extraction failed: {type(error).__name__}: {error}"))
            return [None] * len(units)
        return [None if s is None else extract.with_entries(s, e) for s, e in zip(scores, entries)]

    def _scores(self, unit: Unit, logprobs: list[float]):
        """The unit's option scores from its reads' logprobs; None (and the unit failed) when they do not add up."""
        try:
            return content_scores(unit.questions, unit.segment.reads, logprobs)
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


def _extracts(unit: Unit) -> bool:
    """Whether the unit's content is asked an extraction question (its pass keeps its keys and values)."""
    return any(extract.is_extraction(unit.questions[p.question]) for p in unit.segment.prompt_rows)
