"""Generations for one model, off the event loop, taking turns fairly with each other and with the engine's passes.

    Generator     one thread: generations (chat, /v1/completions) run in turn, one token each (round robin), at
                  most ACTIVE at once (each holds its KV cache; the rest wait in arrival order); a short job for a
                  route (its prompt built, tokens decoded) runs between two tokens. A generation whose caller stops
                  waiting ends at its next token.
    FairLock      the model's lock: taken in the order asked for, so a scoring pass waiting behind a generation
                  step runs next, never after a run of steps that each took the lock back at once
    Guarded       the model as the engine sees it: each pass under that lock

So a short request behind long generations waits a token of each, not their whole answers, and a score waits one
generation step. `queued_turns()` is the tokens each may still generate (admission counts them with the engine's).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import copy
import threading
from collections.abc import AsyncIterator, Callable, Sequence

import attrs
import torch

from spinfc.runtime.chat_format import ChatPrompt, chat_prompt
from spinfc.runtime.generate import GENERATION_THREADS, Cancelled, Generation, Sampling, generating

ACTIVE = 8  # generations stepped in turn; each holds a KV cache of its prompt and answer (bounded memory)


class FairLock:
    """A lock handed to its waiters in the order they asked (threading.Lock lets a thread that releases it take it
    straight back, ahead of one that has waited)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: collections.deque[threading.Event] = collections.deque()

    def acquire(self) -> bool:
        with self._guard:
            if not self._held and not self._waiters:
                self._held = True
                return True
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()  # set by the release that hands the lock over (still held: never free in between)
        return True

    def release(self) -> None:
        with self._guard:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._held = False

    def __enter__(self) -> "FairLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Guarded:
    """The model as the engine sees it: `forward` holds `lock`, so a pass never runs during a generation step.
    Every other attribute is the model's."""

    def __init__(self, model, lock):
        self.model, self.lock = model, lock

    def forward(self, launch):
        with self.lock:
            return self.model.forward(launch)

    __call__ = forward

    def forward_recording(self, launch):
        with self.lock:
            return self.model.forward_recording(launch)

    def __getattr__(self, name: str):
        return getattr(self.model, name)


@attrs.define(eq=False)
class _Turn:
    """One generation in the queue: its steps, its future, its tokens still to come (what admission counts)."""

    steps: object  # generate.generating(...)
    future: concurrent.futures.Future
    left: int


def _retrieve(future: asyncio.Future) -> None:
    """Read the outcome of a generation nobody waits for any more (it ends with `Cancelled`), so asyncio does not
    log it as an exception never retrieved."""
    if not future.cancelled():
        future.exception()


class Generator:
    """Generations for one model on one thread, each step under `lock`; give the engine `guarded` (the model whose
    passes hold the same lock). The thread has its own copy of the tokenizer (a tokenizer is not shared across
    threads)."""

    def __init__(self, model, lock=None):
        self.model = getattr(model, "model", model)  # a stack, also when given a wrapper (GraphedModel, Guarded)
        self.lock = lock or FairLock()
        self.guarded = Guarded(model, self.lock)
        self._tokenizer = None
        self._jobs: collections.deque = collections.deque()  # (callable, future): run between two tokens
        self._waiting: collections.deque[_Turn] = collections.deque()  # generations not yet started
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="spinfc-generate", daemon=True)
        self._thread.start()

    @property
    def available(self) -> bool:
        """Whether the model can generate (a stack with `decode` and a tokenizer, not a test double, whose head reads
        its vocabulary: a decision model's reads codes)."""
        return callable(getattr(self.model, "decode", None)) and getattr(self.model, "name", None) is not None and \
            not getattr(self.model, "codes", ())

    @property
    def tokenizer(self):
        """The generation thread's tokenizer (a copy of the model's, made on first use)."""
        if self._tokenizer is None:
            self._tokenizer = copy.deepcopy(self.model.tokenizer)
        return self._tokenizer

    def queued_turns(self) -> list[int]:
        """Per generation admitted and not ended, the tokens it may still generate (its max_tokens less those
        drawn): what admission counts."""
        with self._wake:
            return [turn.left for turn in (*self._waiting, *self._active_view)]

    # ---- the callers' side ----------------------------------------------------------------------------------

    def _submit(self, job) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._wake:
            if self._closed:
                future.set_exception(Cancelled("the server is shutting down"))
                return future
            if isinstance(job, _Turn):
                job.future = future
                self._waiting.append(job)
            else:
                self._jobs.append((job, future))
            self._wake.notify()
        return future

    async def call(self, work: Callable):
        """`work(tokenizer)` on the generation thread, with its tokenizer (encoding and decoding for a route)."""
        return await asyncio.wrap_future(self._submit(lambda: work(self.tokenizer)))

    async def prepare(self, messages: Sequence[dict], check: Callable[[ChatPrompt], None] | None = None) -> ChatPrompt:
        """The prompt for `messages` (built on the generation thread, with its tokenizer); `check(prompt)` may
        refuse it (the server's limits)."""
        def work(tokenizer) -> ChatPrompt:
            prompt = chat_prompt(tokenizer, messages)
            if check is not None:
                check(prompt)
            return prompt

        return await self.call(work)

    def _start(self, prompt: ChatPrompt, sampling: Sampling, cancelled: threading.Event, on_text=None,
               top_logprobs: int | None = None) -> concurrent.futures.Future:
        steps = generating(self.model, self.tokenizer, prompt, sampling, self.lock, cancelled, on_text, top_logprobs)
        return self._submit(_Turn(steps, None, sampling.max_tokens))

    async def run(self, prompt: ChatPrompt, sampling: Sampling, top_logprobs: int | None = None) -> Generation:
        """The whole answer (with `top_logprobs`, each token's logprobs). If the awaiting task is cancelled (the
        client went away), the generation stops at its next token."""
        cancelled = threading.Event()
        future = asyncio.wrap_future(self._start(prompt, sampling, cancelled, top_logprobs=top_logprobs))
        try:
            return await future
        except asyncio.CancelledError:
            cancelled.set()
            future.add_done_callback(_retrieve)
            raise

    async def stream(self, prompt: ChatPrompt, sampling: Sampling) -> AsyncIterator[str | Generation]:
        """The answer as it is generated: text pieces (joined, they are the answer's text), then the `Generation`.
        Closing the iterator early stops the generation at its next token."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()
        sent = [""]  # what was handed out, written by the generation thread only until it finishes

        def on_text(text: str) -> None:
            if len(text) > len(sent[0]) and text.startswith(sent[0]):
                loop.call_soon_threadsafe(pieces.put_nowait, text[len(sent[0]):])
                sent[0] = text

        future = asyncio.wrap_future(self._start(prompt, sampling, cancelled, on_text))
        future.add_done_callback(lambda _: pieces.put_nowait(None))  # after every piece the thread queued
        try:
            while (piece := await pieces.get()) is not None:
                yield piece
            generation = await future
            if generation.text.startswith(sent[0]) and len(generation.text) > len(sent[0]):
                yield generation.text[len(sent[0]):]
            yield generation
        finally:
            cancelled.set()  # no effect once the generation has finished
            future.add_done_callback(_retrieve)

    def close(self) -> None:
        """Stop the thread: generations and jobs not finished end with `Cancelled`."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)  # after its step in progress: no thread left inside torch at exit

    # ---- the generation thread ------------------------------------------------------------------------------

    _active_view: tuple = ()

    def _loop(self) -> None:
        torch.set_num_threads(GENERATION_THREADS)
        active: collections.deque[_Turn] = collections.deque()
        while True:
            with self._wake:
                while not self._closed and not self._jobs and not self._waiting and not active:
                    self._wake.wait()
                if self._closed:
                    break
                jobs = list(self._jobs)
                self._jobs.clear()
                while self._waiting and len(active) < ACTIVE:
                    active.append(self._waiting.popleft())
                self._active_view = tuple(active)
            for work, future in jobs:
                _settle(future, work)
            if active:
                turn = active.popleft()
                if self._step(turn):
                    active.append(turn)
        ended = Cancelled("the server is shutting down")
        for turn in [*active, *self._waiting]:
            turn.steps.close()
            _fail(turn.future, ended)
        for _, future in self._jobs:
            _fail(future, ended)

    def _step(self, turn: _Turn) -> bool:
        """One token of `turn`; False once it has ended (its future settled)."""
        if turn.future.cancelled():  # nobody waits: stopped before another token
            turn.steps.close()
            turn.left = 0
            return False
        try:
            next(turn.steps)
        except StopIteration as done:
            turn.left = 0
            _settle(turn.future, lambda: done.value)
            return False
        except BaseException as error:  # Cancelled, or the model's error: the caller is told
            turn.left = 0
            _fail(turn.future, error)
            return False
        turn.left = max(0, turn.left - 1)
        return True


def _settle(future: concurrent.futures.Future, work: Callable) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(work())
    except BaseException as error:  # noqa: BLE001 (handed to the caller)
        future.set_exception(error)


def _fail(future: concurrent.futures.Future, error: BaseException) -> None:
    if future.set_running_or_notify_cancel():
        future.set_exception(error)
