"""What each slot does with its beams' next-token candidates, one step at a time.

A walker starts with one beam (fed the prompt's last token) and, after each step, says which beams go on and with
which token: `advance(part) -> [(parent, token), ...]` (parent: a row of its previous beams), where `part` is the
step's result for its rows (`Part`: each row's best candidates, copied from the device, and the full rows on
request). Before a step, `rows()` gives each current beam's grammar matcher (its token mask is built for the step)
and log-probability (added to its row's candidates). The decode loop (decode.py) runs every walker's beams in one
batch, so slots of any kind, on any content, share steps.

    Search   <*> <n> <$>: beam search under a grammar, as transformers' beam search with length_penalty 0 and
             early_stopping False ranks (the canonical search: answers by their full log-probability)
    Sample   <gen>: one beam, greedy or sampled, until a stop token, the terminator or max_tokens
    Forced   given answers' tokens: their log-probabilities on another content (the floor), read in one go
             (decode.py feeds every token of every answer at once; nothing is decided step by step)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator

import attrs
import numpy as np
import torch

from spinfc.runtime.extract.grammars import Grammars
from spinfc.runtime.launch.generate import Sampling, pick


@attrs.define
class Beam:
    tokens: tuple[int, ...]
    logprob: float
    matcher: object  # xgrammar.GrammarMatcher after `tokens`


@attrs.frozen
class Found:
    """A finished answer: its tokens (the terminator or stop token included) and their log-probability."""

    tokens: tuple[int, ...]
    logprob: float


class Part:
    """One walker's rows of a step: each row's best `k` candidates (values: its masked log-probabilities plus its
    beam's, float32 as the device computed them; tokens), and `full()`, every candidate of the rows (copied from
    the device only when asked). `ordered()` yields (value, row, token) best first, ties by row then token: the
    copied candidates while they are provably the best (above every row's k-th value), then the rest from the full
    rows, so the order never depends on k. The first masked candidate (-inf) is the last yielded."""

    def __init__(self, values: np.ndarray, tokens: np.ndarray, vocab: int, full: Callable[[], torch.Tensor]):
        self.values, self.tokens, self.vocab, self._full = values, tokens, vocab, full
        k = values.shape[1]
        self.threshold = -math.inf if k >= vocab else float(values[:, k - 1].max())

    @property
    def size(self) -> int:
        """Candidates in all (rows x vocabulary)."""
        return self.values.shape[0] * self.vocab

    def full(self) -> torch.Tensor:
        return self._full()

    def ordered(self) -> Iterator[tuple[float, int, int]]:
        n, k = self.values.shape
        values, rows, tokens = self.values.ravel(), np.repeat(np.arange(n), k), self.tokens.ravel()
        given = 0
        for i in np.lexsort((tokens, rows, -values)):
            value = float(values[i])
            if not (value > self.threshold or value == -math.inf):
                break
            yield value, int(rows[i]), int(tokens[i])
            given += 1
            if value == -math.inf:  # nothing below: the caller stops here
                return
        else:
            return
        flat = self.full().reshape(-1)
        ordered_values, order = torch.sort(flat, descending=True, stable=True)  # ties by row, then token
        for value, index in zip(ordered_values[given:].tolist(), order[given:].tolist()):
            yield value, *divmod(index, self.vocab)
            if value == -math.inf:
                return


class Search:
    """Beam search of `width` beams. Per step, over every beam's allowed continuations ranked by total logprob:
    the finishing ones (completing the grammar, a token holding the terminator after text the grammar accepts, or
    a stop token) among the first `width` are answers; the best
    `width` that do not finish go on. Keeps the best `width` answers; stops when no beam is left, when `width`
    answers are found and none of the beams going on can beat the worst of them (a logprob only falls), or at
    `max_tokens` (beams that have not finished by then are not answers)."""

    def __init__(self, grammars: Grammars, regex: str, width: int, max_tokens: int,
                 ending: tuple[str, torch.Tensor, dict[int, str]], terminated: bool = False):
        """`ending`: the terminator, the bitmask of tokens holding it and their texts (`Grammars.ending_tokens`);
        `terminated`: the regex ends with that terminator (it cannot be complete before it)."""
        self.grammars, self.width, self.max_tokens, self.terminated = grammars, width, max_tokens, terminated
        self.end, self.ending_mask, self.ending_texts = ending
        self.running = [Beam((), 0.0, grammars.matcher(regex))]
        self.found: list[Found] = []
        self.done = False
        self.reached_max_tokens = False  # beams were still going at max_tokens (why none may have finished)
        self._improvable = True

    def rows(self) -> list[tuple[object, float]]:
        """(matcher, logprob) of each running beam, in row order: its next token is masked by the matcher (and may
        be one holding the terminator, `ending_mask`)."""
        return [(beam.matcher, beam.logprob) for beam in self.running]

    def advance(self, part: Part) -> list[tuple[int, int]]:
        """Candidates best first, in windows of 2 x width that widen (doubling) while too few of them are valid
        and beams are still wanted, as a flat top-k over the masked rows would."""
        last_step = len(self.running[0].tokens) + 1 >= self.max_tokens
        going: list[Beam] = []
        parents: list[int] = []
        new_found: list[Found] = []
        k = min(part.size, 2 * self.width)
        rank = -1  # among the valid candidates (a token holding the terminator may not be one)
        for index, (score, parent, token) in enumerate(part.ordered()):
            if index == k:
                if k < part.size and len(going) < self.width and not last_step:
                    k = min(part.size, 2 * k)
                else:
                    break
            if score == -math.inf or (len(going) == self.width or last_step) and rank + 1 >= self.width:
                break
            beam = self.running[parent]
            if token in self.ending_texts:
                text = self.ending_texts[token]
                if self.grammars.ends_with(beam.matcher, text[: text.index(self.end) + len(self.end)]) is None:
                    continue
                matcher, finishes = None, True
            else:
                matcher = beam.matcher.fork()
                if not matcher.accept_token(token):
                    continue
                # A grammar that is complete may allow nothing but a stop token (the answer ends here). One that
                # ends with a terminator completes only on it, which only an ending token holds, so no other token
                # completes it; without one, the mask of a complete grammar says. (Masks of the beams that go on
                # are built for the next step, in one batch.)
                finishes = token in self.grammars.stop_tokens or not self.terminated and matcher.is_completed() and bool(
                    self.grammars.only_stops(self.grammars.masks([matcher]))[0])
            rank += 1
            if finishes:
                if rank < self.width and self._improvable:
                    new_found.append(Found(beam.tokens + (token,), score))
            elif not last_step and len(going) < self.width:
                going.append(Beam(beam.tokens + (token,), score, matcher))
                parents.append(parent)
        self.found = sorted(self.found + new_found, key=lambda f: -f.logprob)[: self.width]
        self.reached_max_tokens = last_step
        self.running = going
        if going:
            worst = self.found[-1].logprob if len(self.found) == self.width else -math.inf
            self._improvable = going[0].logprob > worst
        self.done = not going or not self._improvable
        return [] if self.done else [(p, beam.tokens[-1]) for p, beam in zip(parents, going)]


class Sample:
    """One beam: the most likely token each step (temperature 0) or a draw (seeded; no seed: a random one), until a
    stop token, a token whose text holds the terminator, or `max_tokens` tokens (finish "length")."""

    def __init__(self, tokenizer, stop_tokens: frozenset[int], end: str, sampling: Sampling):
        self.tokenizer, self.stop_tokens, self.end, self.sampling = tokenizer, stop_tokens, end, sampling
        seed = sampling.seed if sampling.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.generator = torch.Generator().manual_seed(seed) if sampling.temperature > 0 else None
        self.tokens: list[int] = []
        self.logprob = 0.0
        self.finish = "length"
        self.done = False

    width = 1

    def rows(self) -> list[tuple[object, float]]:
        return [(None, 0.0)]  # no mask: its row's candidates are the model's log-probabilities

    def advance(self, part: Part) -> list[tuple[int, int]]:
        if self.sampling.temperature == 0:  # the most likely token (the lowest id among equals, as argmax)
            logprob, _, token = next(part.ordered())
        else:
            row = part.full()[0]
            token = pick(row, self.sampling, self.generator)
            logprob = float(row[token])
        self.tokens.append(token)
        self.logprob += logprob
        if token in self.stop_tokens or (self.end and self.end in self.tokenizer.decode(self.tokens)):
            self.finish, self.done = "stop", True
        elif len(self.tokens) >= self.sampling.max_tokens:
            self.done = True
        return [] if self.done else [(0, token)]


class Forced:
    """Given answers' tokens: `logprobs[i]` is answer i's total log-probability once read (decode.py reads them)."""

    def __init__(self, answers: list[tuple[int, ...]]):
        self.answers = [tuple(a) for a in answers]
        self.logprobs = [0.0] * len(answers)
        self.done = not answers
