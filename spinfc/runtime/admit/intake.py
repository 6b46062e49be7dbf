"""The engine's compile side: requests in, `Compiled` out, on one compile thread (a tokenizer is not shared across
threads), through the same compiler driver `spinfc compile` runs, stopping at the segment pass.

It also counts the requests on their way in: announced by the server as their bytes arrive (`expect`), on or
waiting for the compile thread (`arriving`), or compiled and not yet submitted (an announcement or a compiled
request counts for at most PENDING_SECONDS). The worker may hold a part-empty pass a
moment while any are (`Engine._gather`): many small requests arriving together then share passes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from spinfc import compiler
from spinfc.frontend import program_from_request
from spinfc.ir.nodes import Program
from spinfc.passes import SCHEDULED_FROM, PassContext
from spinfc.passes.plan_packing import admits, too_long
from spinfc.runtime.admit.compiled import Compiled
from spinfc.runtime.admit.score_map import ScoreMap
from spinfc.runtime.admit.segment_arrays import SegmentArrays, TreeArrays
from spinfc.runtime.extract import budget, is_extraction
from spinfc.runtime.schedule.scheduler import floor_key

PENDING_SECONDS = 1.0  # a compiled request not submitted within this long no longer counts as arriving
# question sets whose score map, floor key and tree arrays are kept (the least recently used go): as many as the compile
# memo keeps (passes/context.py), since an entry holds its set's trie, and a longer list here would keep alive tries
# the memo has dropped (145 KB a set of 120 questions: at 256 sets this was the largest cache after the content cache)
SETS_REMEMBERED = 64


def _extracts(program: Program) -> bool:
    return any(map(is_extraction, program.questions))


class Intake:
    def __init__(self, model, context: PassContext):
        """`model`: the engine's (its name for the frontend, its weights' identity for floor keys)."""
        self.model, self.model_name, self.context, self.shapes = model, model.name, context, context.shapes
        self._sets: OrderedDict[tuple, tuple] = OrderedDict()  # per question set: (trie, ScoreMap, floor key, TreeArrays)
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spinfc-compile")
        self._lock = threading.Lock()
        self._on_the_way = 0  # requests on (or waiting for) the compile thread
        self._compiled: dict[int, float] = {}  # compiled and not yet submitted: id -> when compiled
        self._expected: OrderedDict[object, float] = OrderedDict()  # announced, not yet submitted: handle -> when

    def compile(self, body: dict, check: Callable[[Program], None] | None = None) -> Compiled:
        """Compile a /v1/score body. `check(program)` sees the program once compiled (before it is queued) and may
        raise to refuse it (the server's limits). Raises CompileError (from the frontend, the passes or `check`;
        ContentTooLong for a content one pass cannot hold) or Refused."""
        return self.compile_program(program_from_request(body, model=self.model_name), check)

    def compile_program(self, program: Program, check: Callable[[Program], None] | None = None) -> Compiled:
        """Compile a program the frontend built (a request's queries, a pack's, or both): the compiler driver
        through the segment pass; packing is the scheduler's, across every request in flight."""
        program = compiler.compile(program, self.context, until=SCHEDULED_FROM, check=check)
        floors = [i for i, content in enumerate(program.contents) if content.is_floor]
        if len(floors) != 1:
            raise ValueError(f"compiled program has floors {floors}")
        for c, segment in enumerate(program.segments):
            if not admits(segment, self.shapes):
                inputs = [i for i in range(len(program.segments)) if i != floors[0]]
                raise too_long("a content with its questions", segment.length, self.shapes,
                               answer_rows=segment.rows, content=None if c == floors[0] else inputs.index(c))
        extracts = _extracts(program)
        if extracts:  # a slot whose beams could not be held at once is refused, not run
            budget.check_fits(self.model, program)
        inputs = tuple(i for i in range(len(program.contents)) if i != floors[0])
        score_map, key, tree = self._per_question_set(program, floors[0])
        return Compiled(program=program, segments=program.segments, floor=floors[0], inputs=inputs,
                        arrays=tuple(SegmentArrays.of(segment, tree) for segment in program.segments),
                        score_map=score_map, extracts=extracts, floor_key=key)

    def _per_question_set(self, program: Program, floor: int) -> tuple[ScoreMap, str, TreeArrays]:
        """The program's ScoreMap, floor key and question tree's arrays (every segment of the program places the
        same tree): functions of its question set (and floor content) alone, so made once per set. The set is known
        by its trie object, which the dedupe-prefixes memo hands back for the same questions (the entry holds the
        trie, so its identity is not reused)."""
        key = (id(program.trie), program.contents[floor].tokens)
        entry = self._sets.get(key)
        if entry is None or entry[0] is not program.trie or program.trie is None:
            entry = (program.trie, ScoreMap(program.questions, program.segments[floor].reads),
                     floor_key(self.model, program, floor), TreeArrays.of(program.segments[floor].tree))
            self._sets[key] = entry
        self._sets.move_to_end(key)
        while len(self._sets) > SETS_REMEMBERED:
            self._sets.popitem(last=False)
        return entry[1:]

    async def compile_async(self, body: dict, check: Callable[[Program], None] | None = None) -> Compiled:
        """`compile` on the compile thread, off the event loop."""
        return await self._on_thread(self.compile, body, check)

    async def compile_program_async(self, program: Program, check: Callable[[Program], None] | None = None) -> Compiled:
        """`compile_program` on the compile thread."""
        return await self._on_thread(self.compile_program, program, check)

    async def _on_thread(self, fn, *args) -> Compiled:
        with self.arriving():
            compiled = await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)
            with self._lock:
                self._compiled[id(compiled)] = time.perf_counter()
            return compiled

    def on_thread(self, fn) -> asyncio.Future:
        """`fn()` on the compile thread, handed to it now, not at the caller's next turn of the event loop (a burst
        of requests keeps the loop busy: a turn waits behind every other request's parsing); counted as arriving
        from now until it has run (`fn` submits what it compiles). Call it on the event loop."""
        with self._lock:
            self._on_the_way += 1
        left = threading.Event()

        def leave() -> None:  # from the compile thread or the loop, whichever is first: once
            with self._lock:
                if not left.is_set():
                    left.set()
                    self._on_the_way -= 1

        def counted():
            try:
                return fn()
            finally:
                leave()

        future = asyncio.get_running_loop().run_in_executor(self._thread, counted)
        future.add_done_callback(lambda _: leave())  # cancelled before it ran (the thread shut down)
        return future

    @contextlib.contextmanager
    def arriving(self):
        """Count a request as on its way in for the duration (its compile)."""
        with self._lock:
            self._on_the_way += 1
        try:
            yield
        finally:
            with self._lock:
                self._on_the_way -= 1

    def expect(self) -> object:
        """A request that may be scored has started to arrive (the server saw its first bytes); returns its handle
        for `withdraw`. Each submission takes the oldest announcement away (a submission does not know its
        request's), and one neither taken nor withdrawn counts for at most PENDING_SECONDS."""
        handle = object()
        with self._lock:
            self._expected[handle] = time.perf_counter()
        return handle

    def withdraw(self, handle: object) -> None:
        """The announced request has ended (answered, refused, or it never needed the engine)."""
        with self._lock:
            self._expected.pop(handle, None)

    def submitted(self, compiled: Compiled) -> None:
        """The request has reached the queue: it no longer counts as arriving."""
        with self._lock:
            self._compiled.pop(id(compiled), None)
            if self._expected:
                self._expected.popitem(last=False)

    @property
    def expecting(self) -> bool:
        """Whether any request is on its way in."""
        with self._lock:
            now = time.perf_counter()
            for key in [k for k, t in self._compiled.items() if now - t > PENDING_SECONDS]:
                del self._compiled[key]
            while self._expected and now - next(iter(self._expected.values())) > PENDING_SECONDS:
                self._expected.popitem(last=False)
            return bool(self._on_the_way or self._compiled or self._expected)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
