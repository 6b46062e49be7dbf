"""The cheap checks of a body's queries (runtime/admit/prechecks.py): the one-walk test of the usual body agrees with the
checks made one by one, so taking it never lets through what they refuse nor refuses what they pass."""

from __future__ import annotations

import random

import msgspec
import pytest

from spinfc.config import LimitExceeded, Limits
from spinfc.frontend.request_schema import ScoringQuery
from spinfc.runtime.admit.prechecks import Prechecks

LIMITS = Limits(max_query_tokens=4, max_option_tokens=2, max_options=3, max_prompts_per_input=6)
LONGEST = 5  # characters a token covers at most: templates up to 20 characters pass, options up to 10


def outcome(check, queries) -> tuple | None:
    try:
        check(queries)
    except LimitExceeded as error:
        return error.code, error.param
    return None


def random_queries(rng: random.Random, placeholders: bool) -> list[ScoringQuery]:
    queries = []
    for k in range(rng.randint(0, 8)):
        query: dict = {"id": f"q{k}", "template": "t" * rng.randint(0, 22)}
        if rng.random() < 0.9:
            query["options"] = ["o" * rng.randint(0, 11) for _ in range(rng.randint(0, 4))]
        if placeholders and rng.random() < 0.3:
            query["placeholders"] = {"x": ["v" * rng.randint(0, 22) for _ in range(rng.randint(1, 3))]}
        queries.append(query)
    return msgspec.convert(queries, list[ScoringQuery])


@pytest.mark.parametrize("longest", [LONGEST, None])
def test_the_one_walk_agrees_with_the_checks_one_by_one(longest: int | None) -> None:
    rng = random.Random(longest or 0)
    checks = Prechecks(LIMITS, longest)
    taken = 0
    for _ in range(3000):
        queries = random_queries(rng, placeholders=rng.random() < 0.3)
        one_by_one = outcome(lambda q: checks.each_query(q, "scoring.queries"), queries)
        assert outcome(checks.queries, queries) == one_by_one
        if checks.plainly_within(queries):
            taken += 1
            assert one_by_one is None, queries
        elif not any(query.placeholders for query in queries):
            assert one_by_one is not None, queries  # the usual body that passes takes the one walk
    assert taken > 300


def test_the_first_check_in_order_names_the_query() -> None:
    checks = Prechecks(LIMITS, LONGEST)
    queries = [ScoringQuery("a", "t", options=["o" * 11]), ScoringQuery("b", "t" * 21)]
    assert outcome(checks.queries, queries) == ("max_option_tokens_exceeded", "scoring.queries[0].options[0]")
    queries[1].options = ["o"] * 4  # counts come before characters
    assert outcome(checks.queries, queries) == ("max_options_exceeded", "scoring.queries[1].options")
