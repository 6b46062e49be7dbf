"""Result assembly: per-read log-probabilities -> each option's logprob, p, floor_p and each question's residual.

    logprob   the option's full probability, log: the sum of its tokens' read logprobs (each given those before it)
    p         softmax over the options' logprobs (normalised over the options given)
    floor_p   the same on the floor (the same question on empty content): p - floor_p is what the content added
    residual  1 - the sum of the options' full probabilities, clamped to [0, 1]: the mass outside the options

The shape is the seed's: per query `{"id", "combinations": [{"values", "options": [{"text", "logprob", "p",
"floor_p"}], "residual"}]}`, one combination per placeholder combination, in the order of expansion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from spinfc.ir.nodes import AnswerRead, OptionSlot, Program, Question

# [question][option] -> the option's full log-probability on one content
ContentScores = tuple[tuple[float, ...], ...]


class OptionScore(msgspec.Struct, frozen=True):
    text: str
    logprob: float
    p: float
    floor_p: float


class Combination(msgspec.Struct, frozen=True):
    values: dict[str, str]
    options: list[OptionScore]
    residual: float


class QueryResult(msgspec.Struct, frozen=True):
    id: str
    combinations: list[Combination]


def _options(question: Question) -> tuple:
    if not isinstance(question.slot, OptionSlot):
        raise TypeError(f"question of query {question.query_id!r} has no option slot; only option slots are scored")
    return question.slot.options


def content_scores(questions: Sequence[Question], reads: Sequence[AnswerRead], logprobs: Sequence[float]) -> ContentScores:
    """Sum one content's read logprobs into full option logprobs.

    Guarantees: every option of every question gets exactly one read per token (step 0 .. len-1), else ValueError
    naming the option; a read's logprob is counted once."""
    if len(reads) != len(logprobs):
        raise ValueError(f"{len(reads)} reads but {len(logprobs)} logprobs")
    sums = [[0.0] * len(_options(q)) for q in questions]
    seen = [[set() for _ in _options(q)] for q in questions]
    for read, logprob in zip(reads, logprobs):
        if read.step in seen[read.question][read.option]:
            raise ValueError(f"question {read.question} option {read.option} step {read.step} was read twice")
        seen[read.question][read.option].add(read.step)
        sums[read.question][read.option] += float(logprob)
    for qi, question in enumerate(questions):
        for oi, option in enumerate(_options(question)):
            if seen[qi][oi] != set(range(len(option.tokens))):
                raise ValueError(
                    f"query {question.query_id!r} option {option.text!r}: read steps {sorted(seen[qi][oi])}, "
                    f"expected 0..{len(option.tokens) - 1}"
                )
    return tuple(tuple(row) for row in sums)


class ScoreMap:
    """How the reads of one program's segments sum into option logprobs, checked once per program (every content of
    a program is asked the same questions, so its segments' reads come in the same order). `scores(logprobs)` is
    `content_scores` for one segment's logprobs, vectorised."""

    def __init__(self, questions: Sequence[Question], reads: Sequence[AnswerRead]) -> None:
        content_scores(questions, reads, [0.0] * len(reads))  # every option read once per token, or ValueError
        sizes = [len(_options(q)) for q in questions]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # [Q + 1]
        self.index = np.fromiter((self.offsets[r.question] + r.option for r in reads), np.int64, len(reads))
        self.total = int(self.offsets[-1])

    def scores(self, logprobs: np.ndarray) -> ContentScores:
        if len(logprobs) != len(self.index):
            raise ValueError(f"{len(self.index)} reads but {len(logprobs)} logprobs")
        sums = np.bincount(self.index, weights=np.asarray(logprobs, np.float64), minlength=self.total).tolist()
        return tuple(tuple(sums[a:b]) for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))


def softmax(logprobs: Sequence[float]) -> list[float]:
    """exp(l_i) / sum_j exp(l_j), computed from the largest so that nothing overflows or underflows to 0/0."""
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


def residual(logprobs: Sequence[float]) -> float:
    """1 - sum of exp(logprob), clamped to [0, 1] (options that extend one another can sum past 1)."""
    return min(1.0, max(0.0, 1.0 - sum(math.exp(lp) for lp in logprobs)))


def query_results(program: Program, scores: ContentScores, floor: ContentScores) -> list[QueryResult]:
    """One content's results, per query in request order, per combination in expansion order."""
    by_query: dict[str, list[Combination]] = {query.id: [] for query in program.queries}
    for qi, question in enumerate(program.questions):
        options = _options(question)
        p, floor_p = softmax(scores[qi]), softmax(floor[qi])
        by_query[question.query_id].append(Combination(
            values=dict(question.values),
            options=[
                OptionScore(text=option.text, logprob=scores[qi][oi], p=p[oi], floor_p=floor_p[oi])
                for oi, option in enumerate(options)
            ],
            residual=residual(scores[qi]),
        ))
    return [QueryResult(id=query_id, combinations=combos) for query_id, combos in by_query.items()]
