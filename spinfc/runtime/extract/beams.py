"""What each slot does with its beams' next-token log-probabilities, one step at a time.

A walker starts with one beam (fed the prompt's last token) and, after each step, says which beams go on and with
which token: `advance(logprobs [n, V]) -> [(parent, token), ...]` (parent: a row of its previous beams). The
decode loop (decode.py) runs every walker's beams in one batch, so slots of any kind, on any content, share steps.

    Search   <*> <n> <$>: beam search under a grammar, as transformers' beam search with length_penalty 0 and
             early_stopping False ranks (the canonical search: answers by their full log-probability)
    Sample   <gen>: one beam, greedy or sampled, until a stop token, the terminator or max_tokens
    Forced   given answers' tokens, read one by one: their log-probabilities on another content (the floor)
"""

from __future__ import annotations

import math
import os

import attrs
import torch

from spinfc.runtime.extract.grammars import Grammars
from spinfc.runtime.generate import Sampling, pick


@attrs.define
class Beam:
    tokens: tuple[int, ...]
    logprob: float
    matcher: object  # xgrammar.GrammarMatcher after `tokens`
    mask: torch.Tensor  # [1, ceil(V / 32)] int32: the tokens allowed next


@attrs.frozen
class Found:
    """A finished answer: its tokens (the terminator or stop token included) and their log-probability."""

    tokens: tuple[int, ...]
    logprob: float


class Search:
    """Beam search of `width` beams. Per step, over every beam's allowed continuations ranked by total logprob:
    the finishing ones (completing the grammar, a token holding the terminator after text the grammar accepts, or
    a stop token) among the first `width` are answers; the best
    `width` that do not finish go on. Keeps the best `width` answers; stops when no beam is left, when `width`
    answers are found and none of the beams going on can beat the worst of them (a logprob only falls), or at
    `max_tokens` (beams that have not finished by then are not answers)."""

    def __init__(self, grammars: Grammars, regex: str, width: int, max_tokens: int,
                 ending: tuple[str, torch.Tensor, dict[int, str]]):
        """`ending`: the terminator, the bitmask of tokens holding it and their texts (`Grammars.ending_tokens`)."""
        self.grammars, self.width, self.max_tokens = grammars, width, max_tokens
        self.end, self.ending_mask, self.ending_texts = ending
        matcher = grammars.matcher(regex)
        self.running = [Beam((), 0.0, matcher, grammars.masks([matcher]))]
        self.found: list[Found] = []
        self.done = False
        self._improvable = True

    def advance(self, logprobs: torch.Tensor) -> list[tuple[int, int]]:
        n, V = logprobs.shape
        masked = logprobs.clone()
        Grammars.apply(masked, torch.cat([beam.mask for beam in self.running]) | self.ending_mask[None, :])
        totals = masked + torch.tensor([beam.logprob for beam in self.running], dtype=masked.dtype)[:, None]
        flat = totals.reshape(-1)
        last_step = len(self.running[0].tokens) + 1 >= self.max_tokens
        going: list[Beam] = []
        parents: list[int] = []
        new_found: list[Found] = []
        k = min(flat.numel(), 2 * self.width)
        seen, rank = 0, -1  # rank: among the valid candidates (a token holding the terminator may not be one)
        while True:
            scores, order = torch.topk(flat, k)
            for index in range(seen, k):
                score = float(scores[index])
                if score == -math.inf or (len(going) == self.width or last_step) and rank + 1 >= self.width:
                    break
                parent, token = divmod(int(order[index]), V)
                beam = self.running[parent]
                if token in self.ending_texts:
                    text = self.ending_texts[token]
                    if self.grammars.ends_with(beam.matcher, text[: text.index(self.end) + len(self.end)]) is None:
                        continue
                    matcher, mask, finishes = None, None, True
                else:
                    matcher = beam.matcher.fork()
                    if not matcher.accept_token(token):
                        continue
                    mask = self.grammars.masks([matcher])
                    finishes = token in self.grammars.stop_tokens or bool(self.grammars.only_stops(mask)[0])
                rank += 1
                if finishes:
                    if rank < self.width and self._improvable:
                        new_found.append(Found(beam.tokens + (token,), score))
                elif not last_step and len(going) < self.width:
                    going.append(Beam(beam.tokens + (token,), score, matcher, mask))
                    parents.append(parent)
            else:
                if k < flat.numel() and len(going) < self.width and not last_step:
                    seen, k = k, min(flat.numel(), 2 * k)
                    continue
            break
        self.found = sorted(self.found + new_found, key=lambda f: -f.logprob)[: self.width]
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

    def advance(self, logprobs: torch.Tensor) -> list[tuple[int, int]]:
        row = logprobs[0]
        token = pick(row, self.sampling, self.generator)
        self.tokens.append(token)
        self.logprob += float(row[token])
        if token in self.stop_tokens or (self.end and self.end in self.tokenizer.decode(self.tokens)):
            self.finish, self.done = "stop", True
        elif len(self.tokens) >= self.sampling.max_tokens:
            self.done = True
        return [] if self.done else [(0, token)]


class Forced:
    """The given answers read token by token: `logprobs[i]` is answer i's total log-probability once done."""

    def __init__(self, answers: list[tuple[int, ...]]):
        self.answers = [a for a in answers]
        self.logprobs = [0.0] * len(answers)
        self._live = list(range(len(answers)))  # the answers the beams hold, in beam order; [all] after step 0
        self._step = 0
        self.done = not answers

    def advance(self, logprobs: torch.Tensor) -> list[tuple[int, int]]:
        t = self._step
        rows = [0] * len(self.answers) if t == 0 else list(range(len(self._live)))
        live = list(range(len(self.answers))) if t == 0 else self._live
        going, parents = [], []
        for row, a in zip(rows, live):
            token = self.answers[a][t]
            self.logprobs[a] += float(logprobs[row, token])
            if t + 1 < len(self.answers[a]):
                going.append(a)
                parents.append((row, self.answers[a][t]))
        self._live, self._step = going, t + 1
        self.done = not going
        return parents
