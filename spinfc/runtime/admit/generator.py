"""Generations for the routes (chat, /v1/completions): prompts built and tokens decoded on a thread of their own, and
each generation handed to the engine, where it draws a token at a time in turn with the passes, the decode slices
and the other generations (turns.py: at most ACTIVE at once, each holding its KV cache; the rest wait in arrival
order). A generation whose caller stops waiting ends before its next token.

So a short request behind long generations waits a token of each, not their whole answers, and a score waits one
generation step. `queued_turns()` is the tokens each may still generate (admission counts them with the engine's).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import threading
from collections.abc import AsyncIterator, Callable, Sequence

from spinfc.runtime.admit.chat_format import ChatPrompt, chat_prompt
from spinfc.runtime.extract.kv import stack_of
from spinfc.runtime.launch.generate import Cancelled, Generation, Sampling, generating


def _retrieve(future: asyncio.Future) -> None:
    """Read the outcome of a generation nobody waits for any more (it ends with `Cancelled`), so asyncio does not
    log it as an exception never retrieved."""
    if not future.cancelled():
        future.exception()


class Generator:
    """Generations on `engine`'s model (its stack: a decode reads one sequence with a KV cache, runtime/launch/generate.py).
    A route's short jobs (`call`) run on one thread with its own copy of the tokenizer, the generations' text is
    decoded on the engine's thread with another (a tokenizer is not shared across threads)."""

    def __init__(self, engine):
        self.engine = engine
        self.model, _ = stack_of(engine.model)  # the stack under the engine's wrappers (GraphedModel)
        self._jobs = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spinfc-generate")
        self._tokenizers = threading.local()  # per thread: the routes' jobs, and the steps' (made by the caller)
        self._steps_tokenizer = None
        self._live: set = set()  # generations handed to the engine and not ended: what admission counts
        self._lock = threading.Lock()
        self._closed = False

    @property
    def available(self) -> bool:
        """Whether the model can generate (a stack with `decode` and a tokenizer, not a test double, whose head reads
        its vocabulary: a decision model's reads codes)."""
        return callable(getattr(self.model, "decode", None)) and getattr(self.model, "name", None) is not None and \
            not getattr(self.model, "codes", ())

    @property
    def tokenizer(self):
        """This thread's copy of the model's tokenizer (made on first use)."""
        if getattr(self._tokenizers, "copy", None) is None:
            self._tokenizers.copy = copy.deepcopy(self.model.tokenizer)
        return self._tokenizers.copy

    def queued_turns(self) -> list[int]:
        """Per generation admitted and not ended, the tokens it may still generate (its max_tokens less those
        drawn): what admission counts."""
        with self._lock:
            return [turn.left for turn in self._live]

    # ---- the callers' side ----------------------------------------------------------------------------------

    async def call(self, work: Callable):
        """`work(tokenizer)` on the routes' thread, with its tokenizer (encoding and decoding for a route)."""
        def job():
            return work(self.tokenizer)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._jobs, job)
        except RuntimeError as error:  # the pool is shut down
            raise Cancelled("the server is shutting down") from error

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
               top_logprobs: int | None = None, cancel: threading.Event | None = None) -> concurrent.futures.Future:
        if self._closed:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(Cancelled("the server is shutting down"))
            return future
        if self._steps_tokenizer is None:  # the engine thread's own copy
            self._steps_tokenizer = copy.deepcopy(self.model.tokenizer)
        steps = generating(self.model, self._steps_tokenizer, prompt, sampling, None, cancelled, on_text,
                           top_logprobs, cancel)
        turn = self.engine.generate(steps, sampling.max_tokens)
        with self._lock:
            self._live.add(turn)
        turn.future.add_done_callback(lambda _: self._ended(turn))
        return turn.future

    def _ended(self, turn) -> None:
        with self._lock:
            self._live.discard(turn)

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

    async def stream(self, prompt: ChatPrompt, sampling: Sampling,
                     cancel: threading.Event | None = None) -> AsyncIterator[str | Generation]:
        """The answer as it is generated: text pieces (joined, they are the answer's text), then the `Generation`.
        Closing the iterator early stops the generation at its next token; setting `cancel` (from any thread) ends
        it there too, as an answer: the Generation of what was drawn, finish "cancelled"."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()
        sent = [""]  # what was handed out, written by the generation thread only until it finishes

        def on_text(text: str) -> None:
            if len(text) > len(sent[0]) and text.startswith(sent[0]):
                loop.call_soon_threadsafe(pieces.put_nowait, text[len(sent[0]):])
                sent[0] = text

        future = asyncio.wrap_future(self._start(prompt, sampling, cancelled, on_text, cancel=cancel))
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
        """No new generation or job; every generation not ended ends with `Cancelled` (the engine drops it before its
        next token)."""
        self._closed = True
        self._jobs.shutdown(wait=False)  # a job queued still runs: a route's encoding or decoding is short
        with self._lock:
            live = list(self._live)
        for turn in live:
            turn.fail(Cancelled("the server is shutting down"))
