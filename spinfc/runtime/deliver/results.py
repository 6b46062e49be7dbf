"""Result assembly: per-read log-probabilities -> each option's logprob, p, floor_p and each question's residual.

    logprob   the option's full probability, log: the sum of its tokens' read logprobs (each given those before it)
    p         softmax over the options' logprobs (normalised over the options given)
    floor_p   the same on the floor (the same question on empty content): p - floor_p is what the content added
    residual  1 - the sum of the options' full probabilities, clamped to [0, 1]: the mass outside the options

The shape is the seed's: per query `{"id", "combinations": [{"values", "options": [{"text", "logprob", "p",
"floor_p"}], "residual"}]}`, one combination per placeholder combination, in the order of expansion. An extraction
query's combination has `answers` and `coverage` instead (<*> <n> <$>: runtime/extract/answers.py), or `text`,
`logprob` and `finish_reason` (<gen>).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from spinfc.ir.nodes import AnswerRead, OptionSlot, Program, Question
from spinfc.wire.results import AnswerScore, Combination, OptionScore, QueryResult

# [question][option] -> the option's full log-probability on one content; an extraction question's row is its
# result (extract.answers: Searched, Generated) on a content, and its PromptContext on the floor
ContentScores = tuple


def _options(question: Question) -> tuple:
    """An option question's options; () for an extraction question (nothing of it is read in the pass)."""
    return question.slot.options if isinstance(question.slot, OptionSlot) else ()


def content_scores(questions: Sequence[Question], reads: Sequence[AnswerRead],
                   logprobs: Sequence[float]) -> ContentScores:
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
    return contents_results(program, [scores], floor)[0]


def contents_results(program: Program, contents: Sequence[ContentScores],
                     floor: ContentScores) -> list[list[QueryResult]]:
    """`query_results` of each of `contents` (the same program's contents, one floor): what depends on the
    question alone (its values, its options' texts, the floor's p) is worked out once, not once per content, and
    each option question's p and residual are the same float operations as `softmax` and `residual`, inlined (so
    the same bits). A question's `values` dict is shared by its combinations on every content: read, not written."""
    slots = {query.id: k for k, query in enumerate(program.queries)}
    ids = list(slots)
    plans = []  # per question: (its query's place, values, option texts or None, floor p)
    for qi, question in enumerate(program.questions):
        options = _options(question)
        texts = tuple(option.text for option in options) if isinstance(question.slot, OptionSlot) else None
        plans.append((slots[question.query_id], dict(question.values), texts,
                      softmax(floor[qi]) if texts else None))
    exp = math.exp
    out = []
    for scores in contents:
        by_query: list[list[Combination]] = [[] for _ in ids]
        for (slot, values, texts, floor_p), row in zip(plans, scores):
            if texts is None:  # an extraction question: its row is what was found (Searched) or generated
                by_query[slot].append(_extracted(values, row))
                continue
            if len(row) == 2:  # the usual question (yes / no): softmax and residual without the loops
                a, b = row
                top = b if b > a else a  # max([a, b]): the first of equal values
                wa, wb = exp(a - top), exp(b - top)
                total = wa + wb
                mass = 1.0 - (exp(a) + exp(b))
                by_query[slot].append(Combination(values, [
                    OptionScore(texts[0], a, wa / total, floor_p[0]), OptionScore(texts[1], b, wb / total, floor_p[1]),
                ], min(1.0, max(0.0, mass))))
                continue
            p = softmax(row)
            by_query[slot].append(Combination(
                values, [OptionScore(text, row[oi], p[oi], floor_p[oi]) for oi, text in enumerate(texts)],
                residual(row)))
        out.append([QueryResult(query_id, combinations) for query_id, combinations in zip(ids, by_query)])
    return out


def _extracted(values: dict, row) -> Combination:
    """An extraction question's combination: a searched slot's answers (p and floor_p over the answers found), or
    the text generated."""
    from spinfc.runtime.extract.answers import Generated  # here: the response schemas need no torch

    if isinstance(row, Generated):
        return Combination(values=values, text=row.text, logprob=row.logprob, finish_reason=row.finish_reason)
    answers = row.answers
    p = softmax([a.logprob for a in answers]) if answers else []
    floor_p = softmax([a.floor_logprob for a in answers]) if answers else []
    return Combination(values=values, coverage=row.coverage, reason=row.reason, answers=[
        AnswerScore(text=a.text, logprob=a.logprob, p=p[k], floor_p=floor_p[k], value=a.value, currency=a.currency,
                    forms=list(a.forms) or None)
        for k, a in enumerate(answers)
    ])
