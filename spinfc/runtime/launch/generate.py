"""Free-text generation for /v1/chat/completions: prompt tokens -> greedy or sampled tokens, until an end-of-turn
token, a stop string or `max_tokens`.

One sequence, with a KV cache (`Model.decode`): one forward of the whole prompt, then one row per new token, so a
completion of n tokens costs about one prompt read plus n single-row forwards. `generating` yields after each token,
so that the engine can run it in turn, token by token, with its passes and the other generations (turns.py): they
share one thread, and never run at the same time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import attrs
import torch

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.models.decode import KVCache

# torch threads while a generation steps (turns.py; the engine's passes keep theirs). A decode
# step is a few hundred small ops; waking a thread pool for each costs more than it saves, and far more when the
# cores are busy: Gemma 3 270M on 2 busy cores, 1.6 s a step with 2 threads, 0.2 s with 1 (a 300-token prompt,
# 15 s and 2 s).
GENERATION_THREADS = 1


@attrs.frozen
class Sampling:
    """How to pick each token: `temperature` 0 is greedy (argmax); above 0, a draw from softmax(logits /
    temperature) restricted to the smallest set of tokens whose probability reaches `top_p`, from a generator
    seeded with `seed` (the same seed, prompt and settings give the same text)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@attrs.frozen
class StepLogprobs:
    """One drawn token's log-probability under the model (before temperature and top_p), and the `top_logprobs`
    most likely tokens at that step as (token, logprob), most likely first."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@attrs.frozen
class Generation:
    text: str  # the completion, cut before the first stop string; without the end-of-turn token
    tokens: tuple[int, ...]  # every token drawn, the end-of-turn token included
    # stop: an end token or a stop string; length: max_tokens reached; cancelled: its `cancel` token was set
    finish_reason: Literal["stop", "length", "cancelled"]
    prompt_tokens: int
    template: str  # which prompt format was used (chat_format.ChatPrompt.template)
    logprobs: tuple[StepLogprobs, ...] = ()  # with top_logprobs: per drawn token, the end-of-turn token left out
    stop_sequence: str | None = None  # the request's stop string that ended it (not the prompt format's own)


class Cancelled(Exception):
    """The caller stopped waiting for this generation; it ended after the step in progress."""


def pick(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """logits: [V] float32 -> the next token under `sampling`."""
    if sampling.temperature == 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.float().cpu() / sampling.temperature, dim=-1)  # [V]
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) < sampling.top_p
        keep[0] = True  # the most likely token always: top_p 0 (OpenAI accepts it) draws only that one
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs, 1, generator=generator))


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the earliest stop string starts in `text`, or None."""
    found = earliest_stop(text, stops)
    return found[0] if found else None


def earliest_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """(where, which) of the stop string that starts earliest in `text` (the first listed of those starting
    there), or None."""
    found = [(text.find(stop), k) for k, stop in enumerate(stops) if stop and stop in text]
    if not found:
        return None
    where, k = min(found)
    return where, stops[k]


def settled(text: str, stops: Sequence[str], prompt: ChatPrompt) -> str:
    """The part of an unfinished answer that later tokens will not change: without its last characters that could
    still begin a stop string, or a character whose bytes are not all drawn yet ("\ufffd"), cleaned as the
    finished answer will be."""
    hold = max((len(stop) for stop in stops), default=1) - 1
    return prompt.clean(text[:len(text) - hold] if hold else text).rstrip("\ufffd")


def step_logprobs(logits: torch.Tensor, token: int, top: int) -> StepLogprobs:
    """logits: [V] -> the drawn token's log-probability and the `top` most likely tokens' (one log_softmax)."""
    scores = torch.log_softmax(logits.float(), dim=-1)  # [V]
    best = torch.topk(scores, top) if top else None
    pairs = tuple(zip(best.indices.tolist(), best.values.tolist())) if best is not None else ()
    return StepLogprobs(token, float(scores[token]), pairs)


def generate(model, tokenizer, prompt: ChatPrompt, sampling: Sampling, lock: threading.Lock | None = None,
             cancelled: threading.Event | None = None, on_text: Callable[[str], None] | None = None,
             top_logprobs: int | None = None, cancel: threading.Event | None = None) -> Generation:
    """`generating` run to its end: the Generation."""
    steps = generating(model, tokenizer, prompt, sampling, lock, cancelled, on_text, top_logprobs, cancel)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def generating(model, tokenizer, prompt: ChatPrompt, sampling: Sampling, lock=None,
               cancelled: threading.Event | None = None, on_text: Callable[[str], None] | None = None,
               top_logprobs: int | None = None, cancel: threading.Event | None = None) -> Iterator[None]:
    """Generate from `prompt.tokens` with `model.decode` (each step under `lock`). Stops at the first of: one
    of `prompt.end_tokens` (finish "stop"), a stop string of `sampling.stop` or `prompt.stop` in the text
    (finish "stop", the text cut before it), `sampling.max_tokens` tokens (finish "length"), `cancel` set (finish
    "cancelled", the answer so far, before the next step reads anything). Raises `Cancelled` once `cancelled` is
    set (the caller stopped waiting: nobody reads the answer). `on_text(text)` is called after each token that
    does not end the answer, with the answer so far as far as it is `settled`. With `top_logprobs` (0 or more)
    each drawn token's `StepLogprobs` is recorded in `Generation.logprobs`. A generator: yields after each token,
    returns the Generation (StopIteration's value), so that generations can take turns token by token
    (runtime/admit/generator.py)."""
    lock = lock or threading.Lock()
    generator = None
    if sampling.temperature > 0:
        generator = torch.Generator().manual_seed(sampling.seed if sampling.seed is not None
                                                  else int.from_bytes(os.urandom(8), "little") >> 1)
    stops = tuple(sampling.stop) + prompt.stop
    cache = KVCache(model.config.layers, device=model.device)
    drawn: list[int] = []
    scored: list[StepLogprobs] = []
    step = torch.tensor(prompt.tokens, dtype=torch.int64)  # [T]: the prompt first, then one token at a time
    text, finish, stopped_by = "", "length", None
    while len(drawn) < sampling.max_tokens:
        if cancelled is not None and cancelled.is_set():
            raise Cancelled("the caller stopped waiting")
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
            break
        with lock:
            logits = model.decode(step, cache)  # [V]
        token = pick(logits, sampling, generator)
        drawn.append(token)
        if top_logprobs is not None and token not in prompt.end_tokens:
            scored.append(step_logprobs(logits, token, top_logprobs))
        if token in prompt.end_tokens:
            finish = "stop"
            break
        text = tokenizer.decode(drawn, skip_special_tokens=False)
        cut = earliest_stop(text, stops)
        if cut is not None:
            text, finish = text[:cut[0]], "stop"
            stopped_by = cut[1] if cut[1] in sampling.stop else None
            break
        if on_text is not None:
            on_text(settled(text, stops, prompt))
        step = torch.tensor([token], dtype=torch.int64)
        yield
    if finish == "stop" and drawn and drawn[-1] in prompt.end_tokens:
        text = tokenizer.decode(drawn[:-1], skip_special_tokens=False)
    return Generation(text=prompt.clean(text), tokens=tuple(drawn), finish_reason=finish,
                      prompt_tokens=len(prompt.tokens), template=prompt.template, logprobs=tuple(scored),
                      stop_sequence=stopped_by)
