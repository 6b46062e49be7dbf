"""program_from_request: the /v1/score body of the seed README, the fixtures, and errors that name the JSON path."""

import copy
import json
from pathlib import Path

import pytest

from spinfc.errors import CompileError, RequestError, TemplateError
from spinfc.frontend import program_from_request
from spinfc.ir.nodes import GenerateSlot, NumberSlot, OptionSlot, TextSlot

FIXTURES = Path(__file__).parents[2] / "fixtures"

SEED = {
    "model": "gemma3-270m",
    "messages": [{"role": "user", "content": "Customer support message:\nI was charged twice for September."}],
    "scoring": {
        "queries": [
            {
                "id": "refund",
                "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}",
                "options": [" yes", " no"],
            },
            {"id": "month", "template": '\n\nQ: Which month was charged twice?\nA: "{*}"'},
        ]
    },
}


def body(**changes) -> dict:
    out = copy.deepcopy(SEED)
    out.update(changes)
    return out


def query(**fields) -> dict:
    return {"id": "q", "template": "\n\nIs it?\nAnswer:<?>", "options": [" yes", " no"], **fields}


def with_queries(*queries) -> dict:
    return body(scoring={"queries": list(queries)})


def error_of(request: dict) -> CompileError:
    with pytest.raises(CompileError) as caught:
        program_from_request(request, "gemma3-270m")
    assert caught.value.hint
    return caught.value


def test_the_seed_request():
    program = program_from_request(SEED, "gemma3-270m")
    assert program.model == "gemma3-270m"
    assert [(c.id, c.text) for c in program.contents] == [("input-0", SEED["messages"][0]["content"])]
    refund, month = program.queries
    assert refund.slot == OptionSlot(refund.slot.options) and [o.text for o in refund.slot.options] == [" yes", " no"]
    assert isinstance(month.slot, TextSlot) and month.slot.stop == '"'
    assert (program.present_before, program.present_after) == ("", "")


@pytest.mark.parametrize("name", ["seed-support", "review-grid", "multi-input"])
def test_fixtures_compile(name):
    request = json.loads((FIXTURES / f"{name}.json").read_text())
    program = program_from_request(request, "gemma3-270m", f"fixtures/{name}.json")
    assert program.contents and program.queries
    assert all(isinstance(q.slot, OptionSlot) for q in program.queries)


def test_placeholder_grid_fixture():
    request = json.loads((FIXTURES / "review-grid.json").read_text())
    aspect = program_from_request(request, "m").queries[1]
    assert aspect.placeholders == (
        ("verb", ("praise", "criticize")),
        ("aspect", ("price", "quality", "delivery", "customer service")),
    )


def test_several_inputs_and_joined_messages():
    request = json.loads((FIXTURES / "multi-input.json").read_text())
    contents = program_from_request(request, "m").contents
    assert [c.id for c in contents] == ["input-0", "input-1", "input-2"]
    assert (
        contents[2].text == "Forum thread: Gardening\n\nUser message:\nMy tomatoes keep splitting after rain. Any tips?"
    )


def test_content_parts_and_generate_and_max_tokens():
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    request = body(messages=[{"role": "user", "content": parts}])
    request["scoring"]["queries"] = [
        {"id": "n", "template": "Count: <n>", "max_tokens": 4},
        {"id": "g", "template": "Summary: <*>", "generate": True},
    ]
    program = program_from_request(request, "m")
    assert program.contents[0].text == "one\n\ntwo"
    assert program.queries[0].slot == NumberSlot(stop="", max_tokens=4)
    assert isinstance(program.queries[1].slot, GenerateSlot)


def test_free_lets_a_number_or_amount_slot_answer_what_the_content_does_not_write():
    request = body()
    request["scoring"]["queries"] = [{"id": "n", "template": "Count: <n>", "free": True},
                                     {"id": "a", "template": "Amount: <$>"}]
    slots = [q.slot for q in program_from_request(request, "m").queries]
    assert [slot.free for slot in slots] == [True, False]


def test_a_request_naming_packs_may_have_no_queries():
    assert program_from_request(body(scoring={}, packs=[{"id": "spinfc/moderation"}]), "m").queries == ()
    assert error_of(body(scoring={"queries": []})).code == "no_queries"


# ---- errors name the JSON path --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_body, code, param",
    [
        (
            with_queries(query(), query(id="r", options=[" yes", " yes"])),
            "duplicate_option",
            "scoring.queries[1].options[1]",
        ),
        (with_queries(query(options=[" yes", " "])), "empty_option", "scoring.queries[0].options[1]"),
        (with_queries(query(options=[])), "no_options", "scoring.queries[0].options"),
        (with_queries(query(template="Name: <*>")), "options_not_allowed", "scoring.queries[0].options"),
        (with_queries(query(), query()), "duplicate_id", "scoring.queries[1].id"),
        (with_queries(query(optoins=[" a"])), "unknown_field", "scoring.queries[0].optoins"),
        (with_queries(query(options=" yes")), "wrong_type", "scoring.queries[0].options"),
        (with_queries(query(placeholders={"x": ["a"]})), "unused_placeholder", "scoring.queries[0].placeholders.x"),
        (with_queries(query(template="Answer:<?> now")), "text_after_option_slot", "scoring.queries[0].template"),
        (
            with_queries({"id": "g", "template": "Name: <*>", "generate": "yes"}),
            "wrong_type",
            "scoring.queries[0].generate",
        ),
        (
            with_queries({"id": "m", "template": "Name: <*>", "max_tokens": 0}),
            "invalid_value",
            "scoring.queries[0].max_tokens",
        ),
        (with_queries(query(max_tokens=4)), "not_allowed", "scoring.queries[0].max_tokens"),
        (
            with_queries({"id": "n", "template": "Count: <n>", "generate": True}),
            "not_allowed",
            "scoring.queries[0].generate",
        ),
        (with_queries({"id": "t", "template": "Name: <*>", "free": True}), "not_allowed", "scoring.queries[0].free"),
        (with_queries({"id": "a", "template": "Pay: <$>", "free": "yes"}), "wrong_type", "scoring.queries[0].free"),
        (with_queries(query(free=True)), "not_allowed", "scoring.queries[0].free"),
        (with_queries({"id": "x", "template": "No slot here"}), "missing_slot", "scoring.queries[0].template"),
        (with_queries({"template": "Is it?<?>", "options": [" a", " b"]}), "missing_field", "scoring.queries[0].id"),
        (with_queries(query(id="has space")), "invalid_value", "scoring.queries[0].id"),
        (body(inputs=[{"messages": []}]), "conflicting_fields", "inputs"),
        ({"scoring": SEED["scoring"]}, "missing_content", None),
        ({"inputs": [{"messages": []}], "scoring": SEED["scoring"]}, "empty_list", "inputs[0].messages"),
        ({"inputs": [], "scoring": SEED["scoring"]}, "empty_list", "inputs"),
        (body(messages=[{"role": "user", "content": 3}]), "wrong_type", "messages[0].content"),
        (
            body(messages=[{"role": "user", "content": [{"type": "file", "file": {}}]}]),
            "unsupported_content",
            "messages[0].content[0].type",
        ),
        (
            body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
            "missing_field",
            "messages[0].content[0].image_url",
        ),
        (body(messages="hello"), "wrong_type", "messages"),
        (body(scoring={"queries": [3]}), "wrong_type", "scoring.queries[0]"),
    ],
)
def test_request_errors(request_body, code, param):
    error = error_of(request_body)
    assert isinstance(error, (RequestError, TemplateError))
    assert (error.code, error.param) == (code, param)
    if param is not None:
        assert error.loc.file == f"<request>:{param}"
        assert param in str(error)


def test_template_error_in_a_request_counts_within_the_template():
    error = error_of(with_queries(query(), query(id="r", template="\n\nIs it?\nAnswer:<foo>")))
    assert isinstance(error, TemplateError)
    assert (error.code, error.param) == ("unknown_slot", "scoring.queries[1].template")
    assert str(error.loc) == "<request>:scoring.queries[1].template:4:8"


def test_placeholder_without_values_in_a_request():
    error = error_of(with_queries(query(template="Is it about {topic}?\nAnswer:<?>")))
    assert (error.code, error.param, error.loc.line, error.loc.column) == (
        "placeholder_without_values",
        "scoring.queries[0].template",
        1,
        13,
    )


def test_body_must_be_an_object():
    assert error_of([1, 2]).code == "wrong_type"


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_remembered_query_set_keeps_a_non_finite_number(bad):
    """The query sets read are remembered by their encoding: a NaN or infinite temperature (a Python caller's body,
    or one built from a TOML file) is read as that number and refused as out of range, not read back as null (and
    refused for a null the body never had)."""
    query = {"id": "reply", "template": "\n\nReply: <gen>", "temperature": bad}
    body = {"messages": SEED["messages"], "scoring": {"queries": [query]}}
    for _ in range(2):  # read, then (were it remembered) recalled
        with pytest.raises(RequestError, match=f"temperature = {bad} is out of range"):
            program_from_request(copy.deepcopy(body), model="gemma3-270m")
