"""decision_queries builds /v1/score queries the frontend parses; decision_answers turns given probabilities into
noul / choice / score answers."""

import math

import pytest

from spinfc.frontend.template import parse_template
from spinfc.ir.nodes import SlotRef, SourceLoc, Text
from spinfc.runtime.decisions import (
    choice_labels,
    decision_answers,
    decision_messages,
    decision_queries,
    escape_template_text,
    gini_confidence,
    level_labels,
)

BODY = {
    "state": "Customer support message:\nI was charged twice for September, please refund one of the charges.",
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?",
                   "criteria": "money back for a charge"},
        "topic": {"type": "choice", "instructions": "What is the message about?",
                  "criteria": {"billing": "charges, invoices, refunds", "technical": "something broken",
                               "other": ""}},
        "anger": {"type": "score", "instructions": "How angry is the customer?",
                  "criteria": ["calm", "annoyed", "angry", "furious"]},
    },
}


def scored(queries, probabilities, floors=None, residual=0.25):
    """Engine-shaped results: one combination per query, `p` from `probabilities[id]`."""
    results = []
    for query in queries:
        ps = probabilities[query["id"]]
        fs = (floors or {}).get(query["id"], [None] * len(ps))
        options = [{"text": t, "logprob": math.log(p) if p else -math.inf, "p": p, "floor_p": f}
                   for t, p, f in zip(query["options"], ps, fs)]
        results.append({"id": query["id"], "combinations": [{"values": {}, "options": options,
                                                              "residual": residual}]})
    return results


def template_text(template: str) -> tuple[str, str]:
    """The literal text before the slot of a parsed template, and the slot kind."""
    parsed = parse_template(template, SourceLoc("<decision>"))
    slot = [p for p in parsed.parts if isinstance(p, SlotRef)]
    assert len(slot) == 1 and parsed.parts[-1] == slot[0]
    return "".join(p.text for p in parsed.parts if isinstance(p, Text)), slot[0].kind


def test_one_query_per_question_with_labels_as_options():
    queries = decision_queries(BODY)
    assert [q["id"] for q in queries] == ["refund", "topic", "anger"]
    assert [q["options"] for q in queries] == [[" yes", " no"], [" A", " B", " C"], [" 1", " 2", " 3", " 4"]]
    texts = {q["id"]: template_text(q["template"]) for q in queries}
    assert all(kind == "options" for _, kind in texts.values())
    assert texts["refund"][0] == ("\n\nQuestion: Does the customer ask for a refund?\nCriteria: money back for a "
                                  "charge\nAnswer yes or no.\nAnswer:")
    assert texts["topic"][0] == ("\n\nQuestion: What is the message about?\nOptions:\nA. billing: charges, "
                                 "invoices, refunds\nB. technical: something broken\nC. other\n"
                                 "Answer with the letter of the best option.\nAnswer:")
    assert texts["anger"][0] == ("\n\nQuestion: How angry is the customer?\nLevels, from the lowest to the "
                                 "highest:\n1. calm\n2. annoyed\n3. angry\n4. furious\n"
                                 "Answer with the number of the level that fits best.\nAnswer:")


def test_user_text_with_slot_and_placeholder_characters_stays_literal():
    tricky = "Is <?> or {name} or \\< or {*} in it?\\"
    body = {"state": "x", "questions": {
        "n": {"type": "noul", "instructions": tricky},
        "c": {"type": "choice", "instructions": "Which?", "criteria": {"<gen>": "{x}", "b\\{": "<n>"}},
        "s": {"type": "score", "instructions": "How?", "criteria": ["<$>", "{?}"]}}}
    queries = {q["id"]: q for q in decision_queries(body)}
    assert tricky in template_text(queries["n"]["template"])[0]
    assert "A. <gen>: {x}\nB. b\\{: <n>\n" in template_text(queries["c"]["template"])[0]
    assert "1. <$>\n2. {?}\n" in template_text(queries["s"]["template"])[0]
    assert escape_template_text("a<b{c\\d") == "a\\<b\\{c\\\\d"


def test_labels_are_prefix_free_and_numbered_beyond_26():
    assert choice_labels(26)[-1] == " Z" and choice_labels(27)[:2] == [" 01", " 02"]
    assert choice_labels(255)[0] == " 001" and choice_labels(255)[-1] == " 255"
    assert level_labels(9) == [f" {i}" for i in range(1, 10)] and level_labels(10)[0] == " 01"
    assert level_labels(50)[-1] == " 50"
    for labels in [choice_labels(n) for n in range(1, 256)] + [level_labels(n) for n in range(2, 51)]:
        assert len(set(labels)) == len(labels)
        ordered = sorted(labels)  # a label that prefixes others sorts right before the first of them
        assert not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))


def test_a_choice_of_255_options_asks_for_the_number():
    criteria = {f"key{i}": f"option {i}" for i in range(255)}
    (query,) = decision_queries({"state": "x", "questions": {"c": {"type": "choice", "instructions": "Which?",
                                                                    "criteria": criteria}}})
    text, _ = template_text(query["template"])
    assert "001. key0: option 0\n" in text and "255. key254: option 254\n" in text
    assert text.endswith("Answer with the number of the best option.\nAnswer:")


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_letter_and_yes_no_labels_are_single_tokens(model):
    from spinfc.registry import load_tokenizer

    tokenizer = load_tokenizer(model)
    for label in [" yes", " no"] + choice_labels(26):
        assert len(tokenizer.encode(label, add_special_tokens=False)) == 1, label
    for label in choice_labels(255) + level_labels(50):  # digits split in these vocabularies: still within limits
        assert len(tokenizer.encode(label, add_special_tokens=False)) <= 5, label


def test_gini_confidence():
    assert gini_confidence([1.0, 0.0, 0.0]) == 1.0
    assert gini_confidence([0.25] * 4) == pytest.approx(0.0)
    assert gini_confidence([1.0]) == 1.0
    # (0.6^2 + 0.3^2 + 0.1^2 - 1/3) / (2/3) = (0.46 - 1/3) * 1.5 = 0.19
    assert gini_confidence([0.6, 0.3, 0.1]) == pytest.approx(0.19)
    assert gini_confidence([0.8, 0.2]) == pytest.approx((2 * 0.8 - 1) ** 2)


def test_answers_from_given_probabilities():
    queries = decision_queries(BODY)
    results = scored(queries, {"refund": [0.8, 0.2], "topic": [0.7, 0.1, 0.2], "anger": [0.1, 0.2, 0.6, 0.1]},
                     floors={"refund": [0.6, 0.4], "topic": [0.2, 0.5, 0.3], "anger": [0.5, 0.5, 0.0, 0.0]})
    response = decision_answers(BODY, results, model="gemma3-270m", input_tokens=31)
    assert response["object"] == "decision" and response["model"] == "gemma3-270m"
    assert response["usage"] == {"input_tokens": 31, "output_tokens": 0, "total_tokens": 31}
    refund, topic, anger = (response["answers"][k] for k in ("refund", "topic", "anger"))
    assert refund == {"type": "noul", "answer": 0.8, "probabilities": {"true": 0.8, "false": 0.2},
                      "confidence": pytest.approx(0.36), "floor": 0.6, "residual": 0.25}
    assert topic["answer"] == "billing"
    assert topic["probabilities"] == {"billing": 0.7, "technical": 0.1, "other": 0.2}
    assert topic["confidence"] == pytest.approx(((0.49 + 0.01 + 0.04) - 1 / 3) * 1.5)
    assert topic["floor"] == {"billing": 0.2, "technical": 0.5, "other": 0.3}
    assert anger["answer"] == pytest.approx(0.2 + 1.2 + 0.3) and anger["level"] == 2
    assert anger["legend"] == ["calm", "annoyed", "angry", "furious"]
    assert anger["probabilities"] == [0.1, 0.2, 0.6, 0.1]
    assert anger["confidence"] == pytest.approx((0.01 + 0.04 + 0.36 + 0.01 - 0.25) / 0.75)
    assert anger["floor"] == pytest.approx(0.5)


def test_answers_accept_results_by_id_in_any_order_and_without_floor():
    queries = decision_queries(BODY)
    results = scored(queries, {"refund": [0.3, 0.7], "topic": [0.2, 0.4, 0.4], "anger": [0.0, 0.0, 0.0, 1.0]})
    response = decision_answers(BODY, {r["id"]: r for r in reversed(results)})
    assert response["answers"]["refund"]["answer"] == 0.3 and response["answers"]["refund"]["floor"] is None
    assert response["answers"]["topic"]["answer"] == "technical"  # a tie goes to the first key
    assert response["answers"]["anger"]["answer"] == 3.0 and response["answers"]["anger"]["confidence"] == 1.0
    assert list(response["answers"]) == ["refund", "topic", "anger"]


def test_answers_refuse_results_that_do_not_match_the_queries():
    queries = decision_queries(BODY)
    results = scored(queries, {"refund": [0.3, 0.7], "topic": [0.2, 0.4, 0.4], "anger": [0.0, 0.0, 0.0, 1.0]})
    with pytest.raises(ValueError, match="no scores for question 'anger'"):
        decision_answers(BODY, results[:2])
    results[0]["combinations"][0]["options"][0]["text"] = " Yes"
    with pytest.raises(ValueError, match="question 'refund' are for options"):
        decision_answers(BODY, results)


def test_messages_come_from_state_or_messages():
    assert decision_messages(BODY) == [{"role": "user", "content": BODY["state"]}]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert decision_messages({"messages": messages, "questions": {}}) == messages


def test_queries_compile_as_a_score_request():
    """The queries are a valid /v1/score body for the frontend, state and all (user text with < and { too)."""
    from spinfc.frontend import program_from_request

    body = {"state": "hi <there> {x}", "questions": {
        **BODY["questions"],
        "wide": {"type": "choice", "instructions": "Which {one}?", "criteria": {f"k{i}": "d" for i in range(255)}},
    }}
    program = program_from_request({"messages": decision_messages(body), "scoring": {"queries": decision_queries(body)}},
                                   "gemma3-270m")
    assert [q.id for q in program.queries] == ["refund", "topic", "anger", "wide"]
    assert [c.text for c in program.contents] == ["hi <there> {x}"]


def test_answers_from_the_engines_result_structs():
    from spinfc.wire.results import Combination, OptionScore, QueryResult

    body = {"state": "x", "questions": {"spam": {"type": "noul", "instructions": "Is it spam?"}}}
    (query,) = decision_queries(body)
    result = QueryResult(id="spam", combinations=[Combination(values={}, residual=0.1, options=[
        OptionScore(text=" yes", logprob=math.log(0.63), p=0.7, floor_p=0.5),
        OptionScore(text=" no", logprob=math.log(0.27), p=0.3, floor_p=0.5)])])
    answer = decision_answers(body, [result])["answers"]["spam"]
    assert (answer["answer"], answer["floor"], answer["residual"]) == (0.7, 0.5, 0.1)
    assert decision_answers(body, {"spam": result})["answers"]["spam"] == answer


def test_server_fields_pass_when_named():
    from spinfc.runtime.decisions import DecisionError

    body = {**BODY, "limits": {"max_options": 2000}}
    with pytest.raises(DecisionError, match="unknown field `limits`"):
        decision_queries(body)
    assert len(decision_queries(body, extra_keys=("limits", "features"))) == 3
