"""POST /v1/decisions with `inputs` (issue 24): every question asked of each input; an input that alone is wrong
gets its own error (code and `param` inside `inputs[i]`) and the others their answers, the answers each gets alone;
a request-level 400 only when no input can be answered, or for a mistake in the questions."""

from __future__ import annotations

import pytest

from tests.rounding import assert_same_across_launches

from .test_decisions import PNG, QUESTIONS, STATE, TRUSTED, client  # noqa: F401 (client: the module's server)

pytestmark = pytest.mark.slow  # loads a packaged model

OTHER = "Customer message: thank you, the new headphones arrived early and sound great."
LONG = "Customer message: " + "the parcel was late again and nobody answered my calls. " * 40
FILE = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "x"}}]}]}
LIMITS = {"max_content_tokens": 200}  # LONG is over it, STATE and OTHER well within


def alone(client, state: str) -> dict:
    response = client.post("/v1/decisions", json={"state": state, "questions": QUESTIONS, "limits": LIMITS},
                           headers=TRUSTED)
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def error(client, body: dict) -> dict:
    """The request-level 400's error object (sent as a trusted caller, who may send `limits`)."""
    response = client.post("/v1/decisions", json=body, headers=TRUSTED)
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    return response.json()["error"]


def test_good_inputs_are_answered_as_alone_and_each_bad_one_gets_its_error(client) -> None:
    body = {"inputs": [{"state": STATE}, {"state": LONG}, {"state": OTHER}, FILE], "questions": QUESTIONS,
            "limits": LIMITS}
    response = client.post("/v1/decisions", json=body, headers=TRUSTED)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "answers" not in answer and [item["index"] for item in answer["inputs"]] == [0, 1, 2, 3]
    good, long, other, file = answer["inputs"]
    # a content packed with others runs in a pass of another shape, whose products round otherwise on the CPU
    assert_same_across_launches(good["answers"], alone(client, STATE), "cpu")
    assert_same_across_launches(other["answers"], alone(client, OTHER), "cpu")
    assert "error" not in good and "answers" not in long and "answers" not in file
    assert (long["error"]["code"], long["error"]["param"]) == ("max_content_tokens_exceeded", "inputs[1].state")
    assert (file["error"]["code"], file["error"]["param"]) == ("unsupported_content",
                                                               "inputs[3].messages[0].content[0].type")
    assert long["error"]["type"] == "invalid_request_error" and "inputs[1].state" in long["error"]["message"]
    assert answer["rounds"] == 2 and answer["usage"]["output_tokens"] == 0 and answer["usage"]["input_tokens"] > 0


def test_when_no_input_can_be_answered_the_request_is_a_400(client) -> None:
    """The request's error is the last input's set aside (as /v1/score's), at its place in the request as sent."""
    err = error(client, {"inputs": [FILE, {"state": LONG}], "questions": QUESTIONS, "limits": LIMITS})
    assert (err["code"], err["param"]) == ("max_content_tokens_exceeded", "inputs[1].state")
    err = error(client, {"inputs": [FILE], "questions": QUESTIONS, "limits": LIMITS})
    assert (err["code"], err["param"]) == ("unsupported_content", "inputs[0].messages[0].content[0].type")
    image = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]}]}
    err = error(client, {"inputs": [{"state": LONG}, image], "questions": QUESTIONS, "limits": LIMITS})
    assert (err["code"], err["param"]) == ("image_unsupported", "inputs[1].messages[0].content[0].image_url")
    assert err["message"].startswith("inputs[1].messages[0].content[0].image_url")


def test_a_mistake_in_the_questions_or_the_inputs_form_is_the_requests(client) -> None:
    questions = {**QUESTIONS, "q": {"type": "poll", "instructions": "Refund?"}}
    err = error(client, {"inputs": [{"state": STATE}, {"state": OTHER}], "questions": questions})
    assert (err["code"], err["param"]) == ("unknown_question_type", "questions.q.type")
    err = error(client, {"inputs": [{"state": STATE}], "state": STATE, "questions": QUESTIONS})
    assert (err["code"], err["param"]) == ("state_and_messages", "inputs")
    err = error(client, {"inputs": [], "questions": QUESTIONS})
    assert (err["code"], err["param"]) == ("wrong_type", "inputs")
    err = error(client, {"inputs": [{"state": STATE, "messages": FILE["messages"]}], "questions": QUESTIONS})
    assert (err["code"], err["param"]) == ("state_and_messages", "inputs[0].state")


def test_one_state_is_answered_as_before(client) -> None:
    response = client.post("/v1/decisions", json={"state": STATE, "questions": QUESTIONS})
    assert response.status_code == 200 and "inputs" not in response.json()
    assert list(response.json()) == ["id", "object", "created", "model", "system_fingerprint", "rounds", "answers",
                                     "usage"]
