"""Generations (chat, /v1/completions) as the engine's work: each takes turns, a token a step, with the passes, the
decode slices and the other generations, in the one loop.

    Generating   one generation while it runs: its steps (generate.generating), its future, the tokens it may still
                 draw (what admission counts)
    Turns        the generations admitted: at most ACTIVE step in turn (each holds a KV cache of its prompt and answer:
                 bounded memory), the rest wait in arrival order; one whose caller stopped waiting is dropped before
                 its next step

So a short request behind long generations waits a token of each, not their whole answers, and a score waits one
generation step.
"""

from __future__ import annotations

import collections
import concurrent.futures

import attrs
import torch

from spinfc.runtime.launch.generate import GENERATION_THREADS

ACTIVE = 8  # generations stepped in turn; each holds a KV cache of its prompt and answer (bounded memory)


@attrs.define(eq=False)
class Generating:
    """A generation while it runs; its future resolves to the `Generation` (StopIteration's value of `steps`)."""

    steps: object  # generate.generating(...): one token a `next`
    future: concurrent.futures.Future
    left: int  # tokens it may still draw (its max_tokens less those drawn)
    seq: int = 0  # arrival order (the scheduler's)

    @property
    def done(self) -> bool:
        return self.future.done()

    def wanted(self) -> bool:
        return not self.future.done()

    def step(self) -> bool:
        """One token (the first step reads the prompt too), with GENERATION_THREADS torch threads on the CPU; True
        once the generation has ended (its future settled). Raises what the model or `generating` raised."""
        threads = torch.get_num_threads()
        torch.set_num_threads(GENERATION_THREADS)
        try:
            next(self.steps)
        except StopIteration as done:
            self.left = 0
            self._settle(done.value)
            return True
        finally:
            torch.set_num_threads(threads)
        self.left = max(0, self.left - 1)
        return False

    def fail(self, error: BaseException) -> None:
        self.left = 0
        try:
            self.future.set_exception(error)
        except concurrent.futures.InvalidStateError:  # settled or cancelled meanwhile
            pass

    def _settle(self, value) -> None:
        try:
            self.future.set_result(value)
        except concurrent.futures.InvalidStateError:
            pass


class Turns:
    def __init__(self) -> None:
        self.active: collections.deque[Generating] = collections.deque()  # the next to step first
        self.waiting: collections.deque[Generating] = collections.deque()  # admitted, not yet started

    def admit(self, generating: Generating) -> None:
        self.waiting.append(generating)

    def ready(self) -> bool:
        """Whether a generation may step now: those nobody waits for are dropped, then the active ones filled up."""
        for queue in (self.active, self.waiting):
            for generating in [g for g in queue if not g.wanted()]:
                queue.remove(generating)
                generating.steps.close()
                generating.left = 0
        while self.waiting and len(self.active) < ACTIVE:
            self.active.append(self.waiting.popleft())
        return bool(self.active)

    def next(self) -> Generating:
        return self.active[0]

    def stepped(self, generating: Generating, ended: bool) -> None:
        """After its step: the next one's turn; an ended one leaves."""
        if ended:
            self.active.remove(generating)
        elif self.active and self.active[0] is generating:
            self.active.rotate(-1)

    def failed(self, generating: Generating, error: BaseException) -> None:
        if generating in self.active:
            self.active.remove(generating)
        generating.fail(error)

    def close(self, error: BaseException) -> None:
        """Every generation not ended fails with `error`."""
        for generating in (*self.active, *self.waiting):
            generating.steps.close()
            generating.fail(error)
        self.active.clear()
        self.waiting.clear()
