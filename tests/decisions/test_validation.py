"""A /v1/decisions body that breaks the format is a DecisionError (400) with a code and the JSON path."""

import pytest

from spinfc.errors import RequestError
from spinfc.runtime.decisions import DecisionError, validate_decision_request


def body(**questions):
    return {"state": "I was charged twice.", "questions": questions or {"q": {"type": "noul", "instructions": "Is it?"}}}


def test_a_valid_body_of_each_type_passes():
    validate_decision_request({
        "model": "gemma3-270m", "state": "text",
        "questions": {
            "spam": {"type": "noul", "instructions": "Is it spam?"},
            "spam2": {"type": "noul", "instructions": "Is it spam?", "criteria": "sells something"},
            "one": {"type": "choice", "instructions": "Which?", "criteria": {"only": ""}},
            "many": {"type": "choice", "instructions": "Which?", "criteria": {str(i): f"o{i}" for i in range(255)}},
            "two": {"type": "score", "instructions": "How?", "criteria": ["low", "high"]},
            "fifty": {"type": "score", "instructions": "How?", "criteria": [f"l{i}" for i in range(50)]},
        },
    })
    validate_decision_request({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                               "questions": {"q": {"type": "noul", "instructions": "Is it?"}}})
    validate_decision_request({**body(), "limits": {}}, extra_keys=("limits",))


def test_media_parts_pass_to_the_content_part_reader():
    """Image, audio and video parts are NInfer's and OpenAI's: the body passes, and they are read (and checked)
    where the rounds are compiled, as /v1/score reads them (tests/media/test_decisions.py)."""
    parts = [{"type": "text", "text": "Here:"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
             {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}},
             {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AA"}},
             {"type": "video", "video": ["data:image/png;base64,AA"]}]
    validate_decision_request({"messages": [{"role": "user", "content": parts}],
                               "questions": {"q": {"type": "noul", "instructions": "Is it?"}}})


CASES = [
    ([], "body", "wrong_type"),
    ({**body(), "stat": "x"}, "stat", "unknown_field"),
    ({**body(), "limits": {}}, "limits", "unknown_field"),
    ({"questions": body()["questions"]}, "state", "missing_field"),
    ({**body(), "messages": [{"role": "user", "content": "x"}]}, "state", "state_and_messages"),
    ({**body(), "state": 3}, "state", "wrong_type"),
    ({"messages": [], "questions": body()["questions"]}, "messages", "wrong_type"),
    ({"messages": [{"content": "x"}], "questions": body()["questions"]}, "messages[0]", "wrong_type"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}],
      "questions": body()["questions"]}, "messages[0].content[0].type", "unsupported_content"),
    ({"messages": [{"role": "user", "content": 5}], "questions": body()["questions"]}, "messages[0].content",
     "wrong_type"),
    ({"state": "x"}, "questions", "missing_field"),
    ({"state": "x", "questions": {}}, "questions", "wrong_type"),
    ({"state": "x", "questions": []}, "questions", "wrong_type"),
    (body(q="noul"), "questions.q", "wrong_type"),
    (body(q={"type": "noul", "instructions": "x", "options": []}), "questions.q.options", "unknown_field"),
    (body(q={"instructions": "x"}), "questions.q.type", "missing_field"),
    (body(q={"type": "rank", "instructions": "x"}), "questions.q.type", "unknown_question_type"),
    (body(q={"type": "noul"}), "questions.q.instructions", "missing_field"),
    (body(q={"type": "noul", "instructions": "  "}), "questions.q.instructions", "invalid_value"),
    (body(q={"type": "noul", "instructions": "x", "criteria": ["a"]}), "questions.q.criteria", "wrong_type"),
    (body(q={"type": "choice", "instructions": "x"}), "questions.q.criteria", "invalid_choice_criteria"),
    (body(q={"type": "choice", "instructions": "x", "criteria": {}}), "questions.q.criteria",
     "invalid_choice_criteria"),
    (body(q={"type": "choice", "instructions": "x", "criteria": {str(i): "" for i in range(256)}}),
     "questions.q.criteria", "invalid_choice_criteria"),
    (body(q={"type": "choice", "instructions": "x", "criteria": {"a": 1}}), "questions.q.criteria.a",
     "invalid_value"),
    (body(q={"type": "score", "instructions": "x", "criteria": ["only"]}), "questions.q.criteria",
     "invalid_score_criteria"),
    (body(q={"type": "score", "instructions": "x", "criteria": [str(i) for i in range(51)]}),
     "questions.q.criteria", "invalid_score_criteria"),
    (body(q={"type": "score", "instructions": "x", "criteria": {"a": "b", "c": "d"}}), "questions.q.criteria",
     "invalid_score_criteria"),
    (body(q={"type": "score", "instructions": "x", "criteria": ["a", ""]}), "questions.q.criteria[1]",
     "invalid_value"),
    (body(q={"type": "score", "instructions": "x", "criteria": ["a", "a "]}), "questions.q.criteria",
     "duplicate_value"),
    ({"state": "x", "questions": {"my id": {"type": "x", "instructions": "y"}}}, 'questions["my id"].type',
     "unknown_question_type"),
]


@pytest.mark.parametrize("request_body,param,code", CASES)
def test_each_mistake_names_its_path_and_code(request_body, param, code):
    with pytest.raises(DecisionError) as caught:
        validate_decision_request(request_body)
    error = caught.value
    assert isinstance(error, RequestError)
    assert (error.param, error.code) == (param, code)
    assert error.hint and (error.message.startswith(f"{param}: ") or code == "unknown_field" and
                           error.message.startswith(f"unknown field `{param.rsplit('.', 1)[-1]}`"))
