"""/v1/decisions (alias /v1/systemone): typed questions over one shared state, answered from one read of it.

    {"state": "...",                       or "messages": [{"role": "user", "content": "..."}]
     "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "topic":  {"type": "choice", "instructions": "What is the message about?",
                   "criteria": {"billing": "charges, invoices, refunds", "technical": "something broken"}},
        "anger":  {"type": "score", "instructions": "How angry is the customer?",
                   "criteria": ["calm", "annoyed", "angry", "furious"]}}}

Each question becomes one /v1/score query (`decision_queries`): an instruction, the options or levels listed with
single-token labels (" A".." Z"; " 1".." 9"; fixed-width numbers beyond, so that no label is a prefix of
another), and an option slot over the labels. The engine scores them as branches of one read of the state;
`decision_answers` turns the label probabilities into answers:

    noul    answer = P(true) (" yes" against " no")
    choice  answer = the most probable key; probabilities per key; confidence = normalised Gini (below)
    score   answer = expected level index (0-based, sum of i * p_i); level = the most probable index; legend = the
            level descriptions; probabilities per level; confidence = normalised Gini

Normalised Gini confidence of probabilities p over K options: (sum p_i^2 - 1/K) / (1 - 1/K), 1 when all mass is on
one option, 0 when it is spread evenly (1 when K = 1). For noul it is (2p - 1)^2. `floor` is the same answer on
empty content (from floor_p); `residual` is the mass the model put outside the labels. Nothing is generated:
usage.output_tokens is always 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from spinfc.errors import RequestError

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TYPES = ("noul", "choice", "score")
MAX_CHOICE_OPTIONS = 255
SCORE_LEVELS = (2, 50)
BODY_KEYS = ("model", "state", "messages", "questions")
QUESTION_KEYS = ("type", "instructions", "criteria")


class DecisionError(RequestError):
    """A /v1/decisions body that breaks the format: a 400 with `code`, the JSON path in `param` and a hint."""


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _fail(param: str, message: str, code: str, hint: str):
    raise DecisionError(f"{param}: {message}", code=code, param=param, hint=hint)


def _kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def validate_decision_request(body, extra_keys: Iterable[str] = ()) -> None:
    """Raise `DecisionError` at the first thing wrong with a /v1/decisions body: unknown fields (but `extra_keys`,
    which the server checks itself, e.g. a trusted caller's `limits` and `features`), neither or both of `state`
    and `messages`, wrong types, an unknown question type, a choice of 0 or more than 255 options, a score of
    fewer than 2 or more than 50 levels, empty or duplicated descriptions."""
    if not isinstance(body, Mapping):
        _fail("body", f"the body is {_kind(body)}, not a JSON object", "invalid_type",
              'send {"state": "...", "questions": {...}}')
    for key in body:
        if key not in BODY_KEYS and key not in extra_keys:
            _fail(_path("", key), "unknown field", "unknown_field", "the fields are " + ", ".join(BODY_KEYS))
    has_state, has_messages = body.get("state") is not None, body.get("messages") is not None
    if has_state == has_messages:
        _fail("state", "send exactly one of `state` (a string) and `messages` (a chat history)",
              "missing_field" if not has_state else "state_and_messages", 'e.g. "state": "the text to judge"')
    if has_state and not isinstance(body["state"], str):
        _fail("state", f"must be a string, not {_kind(body['state'])}", "invalid_type", 'e.g. "state": "..."')
    if has_messages:
        _check_messages(body["messages"])
    questions = body.get("questions")
    if not isinstance(questions, Mapping) or not questions:
        _fail("questions", "must be a non-empty object of question ids to questions", "missing_field"
              if questions is None else "invalid_type", '"questions": {"spam": {"type": "noul", "instructions": '
              '"Is this message spam?"}}')
    for question_id, question in questions.items():
        _check_question(_path("questions", question_id), question_id, question)


def _check_messages(messages) -> None:
    if not isinstance(messages, list) or not messages:
        _fail("messages", "must be a non-empty array of messages", "invalid_type",
              '"messages": [{"role": "user", "content": "..."}]')
    for i, message in enumerate(messages):
        at = _path("messages", i)
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            _fail(at, "a message is an object with a `role` string and a `content`", "invalid_type",
                  '{"role": "user", "content": "..."}')
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        for j, part in enumerate(parts):
            where = _path(_path(at, "content"), j) if isinstance(content, list) else _path(at, "content")
            if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str)):
                continue
            if isinstance(part, Mapping) and part.get("type") in ("image_url", "image", "input_audio", "video"):
                _fail(where, f"{part['type']} parts are not supported: this server reads text only",
                      "unsupported_content", "send the text of the content only")
            _fail(where, "content is a string or an array of {\"type\": \"text\", \"text\": ...} parts",
                  "invalid_type", '"content": "..."')


def _check_question(at: str, question_id, question) -> None:
    if not question_id:
        _fail(at, "a question id is a non-empty string", "invalid_value", 'e.g. "spam"')
    if not isinstance(question, Mapping):
        _fail(at, f"a question is an object, not {_kind(question)}", "invalid_type",
              '{"type": "noul", "instructions": "Is this message spam?"}')
    for key in question:
        if key not in QUESTION_KEYS:
            _fail(_path(at, key), "unknown field", "unknown_field", "a question has " + ", ".join(QUESTION_KEYS))
    kind = question.get("type")
    if kind not in TYPES:
        _fail(_path(at, "type"), f"unknown question type {kind!r}" if kind is not None else "missing",
              "unknown_question_type" if kind is not None else "missing_field", "the types are " + ", ".join(TYPES))
    instructions = question.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        _fail(_path(at, "instructions"), "must be a non-empty string: the question to answer", "missing_field"
              if instructions is None else "invalid_value", '"instructions": "Is this message spam?"')
    criteria, where = question.get("criteria"), _path(at, "criteria")
    if kind == "noul" and criteria is not None and not isinstance(criteria, str):
        _fail(where, f"must be a string (what makes the answer true), not {_kind(criteria)}", "invalid_type",
              'e.g. "criteria": "asks for money back"')
    if kind == "choice":
        if not isinstance(criteria, Mapping) or not 1 <= len(criteria) <= MAX_CHOICE_OPTIONS:
            count = f"{len(criteria)} options" if isinstance(criteria, Mapping) else _kind(criteria)
            _fail(where, f"a choice's criteria map 1 to {MAX_CHOICE_OPTIONS} option keys to descriptions, got "
                  f"{count}", "invalid_choice_criteria", '"criteria": {"billing": "charges", "other": "anything else"}')
        for key, description in criteria.items():
            if not key.strip() or not isinstance(description, str):
                _fail(_path(where, key), "an option is a non-empty key and a description string", "invalid_value",
                      '"billing": "charges, invoices and refunds"')
    if kind == "score":
        low, high = SCORE_LEVELS
        if not isinstance(criteria, list) or not low <= len(criteria) <= high:
            count = f"{len(criteria)} levels" if isinstance(criteria, list) else _kind(criteria)
            _fail(where, f"a score's criteria are an ordered array of {low} to {high} level descriptions, got "
                  f"{count}", "invalid_score_criteria", '"criteria": ["calm", "annoyed", "angry"]')
        for i, level in enumerate(criteria):
            if not isinstance(level, str) or not level.strip():
                _fail(_path(where, i), "a level is a non-empty description string", "invalid_value", '"annoyed"')
        if len({level.strip() for level in criteria}) != len(criteria):
            _fail(where, "two levels have the same description", "duplicate_value", "describe each level apart")


def escape_template_text(text: str) -> str:
    """`text` as literal template text: `\\`, `<` and `{` escaped (frontend/template.lark), so user wording can
    never open a slot or a placeholder."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace("{", "\\{")


def choice_labels(count: int) -> list[str]:
    """Labels of `count` options: " A".." Z" up to 26, else " 01".." 99" / " 001".." 255" (fixed width: no
    label is a prefix of another, so each label's probability is its own)."""
    if count <= len(LETTERS):
        return [f" {LETTERS[i]}" for i in range(count)]
    width = len(str(count))
    return [f" {i:0{width}d}" for i in range(1, count + 1)]


def level_labels(count: int) -> list[str]:
    """Labels of `count` ordered levels: " 1".." 9" up to 9 (one digit, one token), else " 01".." 50"."""
    width = 1 if count <= 9 else 2
    return [f" {i:0{width}d}" for i in range(1, count + 1)]


def _question_text(instructions: str) -> str:
    return f"\n\nQuestion: {escape_template_text(instructions.strip())}\n"


def _template(question: Mapping) -> tuple[str, list[str]]:
    """The template (after the content) and the option labels of one validated question."""
    kind, criteria = question["type"], question.get("criteria")
    text = _question_text(question["instructions"])
    if kind == "noul":
        if criteria and criteria.strip():
            text += f"Criteria: {escape_template_text(criteria.strip())}\n"
        return text + "Answer yes or no.\nAnswer:<?>", [" yes", " no"]
    if kind == "choice":
        labels = choice_labels(len(criteria))
        text += "Options:\n"
        for label, (key, description) in zip(labels, criteria.items()):
            line = f"{key}: {description.strip()}" if description.strip() else key
            text += f"{label.strip()}. {escape_template_text(line)}\n"
        what = "letter" if len(criteria) <= len(LETTERS) else "number"
        return text + f"Answer with the {what} of the best option.\nAnswer:<?>", labels
    labels = level_labels(len(criteria))
    text += "Levels, from the lowest to the highest:\n"
    for label, description in zip(labels, criteria):
        text += f"{label.strip()}. {escape_template_text(description.strip())}\n"
    return text + "Answer with the number of the level that fits best.\nAnswer:<?>", labels


def decision_queries(body: Mapping) -> list[dict]:
    """The /v1/score queries (`{"id", "template", "options"}`, one per question, ids = question ids) that answer
    the request's questions. Validates `body` first (raises `DecisionError`)."""
    validate_decision_request(body)
    queries = []
    for question_id, question in body["questions"].items():
        template, labels = _template(question)
        queries.append({"id": question_id, "template": template, "options": labels})
    return queries


def decision_messages(body: Mapping) -> list[dict]:
    """The content to read, as chat messages: `messages` as given, or `state` as one user message."""
    if body.get("messages") is not None:
        return list(body["messages"])
    return [{"role": "user", "content": body["state"]}]


def gini_confidence(probabilities: Iterable[float]) -> float:
    """Normalised Gini confidence in [0, 1]: (sum p^2 - 1/K) / (1 - 1/K); 1.0 for K <= 1."""
    ps = list(probabilities)
    k = len(ps)
    if k <= 1:
        return 1.0
    value = (sum(p * p for p in ps) - 1.0 / k) / (1.0 - 1.0 / k)
    return min(1.0, max(0.0, value))


def _label_probabilities(result: Mapping, labels: list[str], question_id: str, field: str) -> list[float | None]:
    combination = result["combinations"][0]
    by_text = {option["text"]: option.get(field) for option in combination["options"]}
    if set(by_text) != set(labels):
        raise ValueError(f"the scores of question {question_id!r} are for options {sorted(by_text)}, not the "
                         f"labels {labels} that decision_queries asked: pass the engine's results unchanged")
    return [by_text[label] for label in labels]


def _answer(question: Mapping, result: Mapping, labels: list[str], question_id: str) -> dict:
    p = _label_probabilities(result, labels, question_id, "p")
    floor = _label_probabilities(result, labels, question_id, "floor_p")
    has_floor = all(f is not None for f in floor)
    residual = result["combinations"][0].get("residual")
    kind, criteria = question["type"], question.get("criteria")
    if kind == "noul":
        return {"type": "noul", "answer": p[0], "probabilities": {"true": p[0], "false": p[1]},
                "confidence": gini_confidence(p), "floor": floor[0] if has_floor else None, "residual": residual}
    if kind == "choice":
        keys = list(criteria)
        best = max(range(len(keys)), key=lambda i: (p[i], -i))  # the first key wins a tie
        return {"type": "choice", "answer": keys[best], "probabilities": dict(zip(keys, p)),
                "confidence": gini_confidence(p), "floor": dict(zip(keys, floor)) if has_floor else None,
                "residual": residual}
    level = max(range(len(p)), key=lambda i: (p[i], -i))
    return {"type": "score", "answer": sum(i * pi for i, pi in enumerate(p)), "level": level,
            "legend": list(criteria), "probabilities": p, "confidence": gini_confidence(p),
            "floor": sum(i * f for i, f in enumerate(floor)) if has_floor else None, "residual": residual}


def decision_answers(body: Mapping, scored: Iterable[Mapping] | Mapping[str, Mapping], *, model: str | None = None,
                     input_tokens: int = 0) -> dict:
    """The /v1/decisions response for `body` given `scored`, the engine's results for `decision_queries(body)`
    on this body's content (each `{"id", "combinations": [{"values", "options": [{"text", "p", "floor_p", ...}],
    "residual"}]}`, as a list or a map by id). The server adds `id`, `created` and `system_fingerprint`."""
    results = dict(scored) if isinstance(scored, Mapping) else {r["id"]: r for r in scored}
    answers = {}
    for question_id, question in body["questions"].items():
        if question_id not in results:
            raise ValueError(f"no scores for question {question_id!r}: score every query of decision_queries")
        _, labels = _template(question)
        answers[question_id] = _answer(question, results[question_id], labels, question_id)
    return {"object": "decision", "model": model, "answers": answers,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0, "total_tokens": input_tokens}}
