"""What a scored content answers, per query, as it goes on the wire: the seed's result shape (`runtime/deliver/results.py`
assembles it from a pass's logprobs).

    QueryResult   a query's id and its combinations, one per placeholder combination, in the order of expansion
    Combination   an option question's options and residual; a searched slot's answers and coverage; a <gen>'s text
"""

from __future__ import annotations

import msgspec


# gc=False: the score structs hold only strings and numbers, so they are never in a reference cycle; untracked by
# the collector, the thousands a large response makes cost it nothing (24 contents x 56 questions: 1.8 -> 1.4 ms)
class OptionScore(msgspec.Struct, frozen=True, gc=False):
    text: str
    logprob: float
    p: float
    floor_p: float


class AnswerScore(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One answer of a searched slot; `value` for <n> and <$>, `currency` for <$>."""

    text: str
    logprob: float
    p: float
    floor_p: float
    value: int | float | None = None
    currency: str | None = None
    forms: list[str] | None = None  # <n> <$>: the texts merged into this answer (same value and currency)


class Combination(msgspec.Struct, frozen=True, omit_defaults=True):
    """An option question: options and residual. A searched slot: answers and coverage. <gen>: text, logprob and
    finish_reason."""

    values: dict[str, str]
    options: list[OptionScore] | None = None
    residual: float | None = None
    answers: list[AnswerScore] | None = None
    coverage: float | None = None
    reason: str | None = None  # a searched slot with no answer: why
    text: str | None = None
    logprob: float | None = None
    finish_reason: str | None = None


class QueryResult(msgspec.Struct, frozen=True):
    id: str
    combinations: list[Combination]
