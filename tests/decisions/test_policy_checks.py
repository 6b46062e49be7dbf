"""A /v1/decisions request is checked against the call's policy (runtime/admit/policy.py) before anything is tokenized,
by `check_decisions`, the one function the route and each attempt with `inputs` call: the questions counted, then
the sizes of what is read and of each piece of a question the client wrote, each refusal naming where."""

from __future__ import annotations

import pytest

from spinfc.config import LimitExceeded, Limits
from spinfc.runtime.admit.policy import Policy
from spinfc.runtime.decisions import decision_queries
from spinfc.runtime.decisions.rounds import check_decisions

STATE = "Customer message: the parcel never arrived and I want my money back."
BODY = {"state": STATE, "questions": {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    "topic": {"type": "choice", "instructions": "What is it about?",
              "criteria": {"delivery": "parcels", "billing": "charges"}}}}
INPUTS = {"inputs": [{"state": "short"}, {"messages": [{"role": "user", "content": STATE}]}],
          "questions": BODY["questions"]}


def refused(policy: Policy, body: dict) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as raised:
        check_decisions(policy, body, decision_queries(body))
    return raised.value


def test_a_body_within_the_limits_passes() -> None:
    check_decisions(Policy(longest_token=4), BODY, decision_queries(BODY))
    check_decisions(Policy(longest_token=4), INPUTS, decision_queries(INPUTS))


def test_the_questions_are_counted_first() -> None:
    error = refused(Policy(Limits(max_prompts_per_input=1, max_content_tokens=1), longest_token=1), BODY)
    assert (error.code, error.param) == ("max_prompts_per_input_exceeded", "questions")


@pytest.mark.parametrize("body, param", [(BODY, "state"), (INPUTS, "inputs[1].messages")])
def test_what_is_read_is_sized_where_it_is(body: dict, param: str) -> None:
    error = refused(Policy(Limits(max_content_tokens=4), longest_token=2), body)
    assert (error.code, error.param) == ("max_content_tokens_exceeded", param)
    assert "characters, and no token of this model covers more than 2" in error.message


def test_each_written_piece_is_sized_not_the_template() -> None:
    error = refused(Policy(Limits(max_query_tokens=8), longest_token=2), BODY)
    assert (error.code, error.param) == ("max_query_tokens_exceeded", "questions.refund.instructions")
    # with inputs the shared pieces are checked before any input's content
    error = refused(Policy(Limits(max_query_tokens=8, max_content_tokens=1), longest_token=2), INPUTS)
    assert error.param == "questions.refund.instructions"
