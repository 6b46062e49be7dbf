"""Validation of a /v1/decisions body: the first mistake, as a 400 with a code and the JSON path of the field.

Over HTTP the body's fields and types are checked first by its struct (wire/decisions.py, in the words of
spinfc/frontend/mistakes.py); this checks what a struct cannot say (exactly one of state and messages, the
question types and their criteria) and repeats the field checks, with the same codes, for callers with a dict.
Media parts in `messages` (image_url, input_audio, video_url, video) are read as /v1/score reads them, by the
content-part reader when the rounds are compiled (frontend/content_parts.py), with the same codes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from spinfc.errors import RequestError
from spinfc.frontend import mistakes
from spinfc.frontend.content_parts import PART_TYPES

MEDIA_PART_TYPES = tuple(kind for kind in PART_TYPES if kind != "text")  # image_url, input_audio, video_url, video

TYPES = ("noul", "choice", "score")
MAX_CHOICE_OPTIONS = 255
SCORE_LEVELS = (2, 50)
BODY_KEYS = ("model", "state", "messages", "inputs", "questions")
INPUT_KEYS = ("state", "messages")
QUESTION_KEYS = ("type", "instructions", "criteria")


class DecisionError(RequestError):
    """A /v1/decisions body that breaks the format: a 400 with `code`, the JSON path in `param` and a hint."""


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key)}]"


def _unknown(at: str, key: str, known: Iterable[str]):
    message, hint = mistakes.unknown_field(key, known, at)
    raise DecisionError(message, code=mistakes.UNKNOWN_FIELD, param=_path(at, key), hint=hint)


def _fail(param: str, message: str, code: str, hint: str):
    raise DecisionError(f"{param}: {message}", code=code, param=param, hint=hint)


def _kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def validate_decision_request(body, extra_keys: Iterable[str] = (), codes: tuple[str, ...] = ()) -> None:
    """Raise `DecisionError` at the first thing wrong with a /v1/decisions body: unknown fields (but `extra_keys`,
    which the server checks itself, e.g. a trusted caller's `limits` and `features`), not exactly one of `state`,
    `messages` and `inputs` (each input exactly one of `state` and `messages`), wrong types, an unknown question type, a choice of 0 or more than 255 options, a score of
    fewer than 2 or more than 50 levels, empty or duplicated descriptions. Against a decision model (`codes`: its
    head's labels) a question is a choice over its codes (`_check_code_question`)."""
    if not isinstance(body, Mapping):
        _fail("body", f"the body is {_kind(body)}, not a JSON object", "wrong_type",
              'send {"state": "...", "questions": {...}}')
    for key in body:
        if key not in BODY_KEYS and key not in extra_keys:
            _unknown("", key, BODY_KEYS + tuple(extra_keys))
    inputs = body.get("inputs")
    if inputs is None:
        _check_content(body, "")
    elif body.get("state") is not None or body.get("messages") is not None:
        _fail("inputs", "send `inputs` (several contents) or one `state` or `messages`, not both",
              "state_and_messages", 'e.g. "inputs": [{"state": "..."}, {"state": "..."}]')
    elif not isinstance(inputs, list) or not inputs:
        _fail("inputs", "must be a non-empty array of inputs, each {\"state\": ...} or {\"messages\": [...]}",
              "wrong_type", '"inputs": [{"state": "the first text"}, {"state": "the second"}]')
    else:
        for i, item in enumerate(inputs):
            at = _path("inputs", i)
            if not isinstance(item, Mapping):
                _fail(at, f"an input is an object, not {_kind(item)}", "wrong_type", '{"state": "..."}')
            for key in item:
                if key not in INPUT_KEYS:
                    _unknown(at, key, INPUT_KEYS)
            _check_content(item, at)
    questions = body.get("questions")
    if not isinstance(questions, Mapping) or not questions:
        _fail("questions", "must be a non-empty object of question ids to questions", "missing_field"
              if questions is None else "wrong_type", '"questions": {"spam": {"type": "noul", "instructions": '
              '"Is this message spam?"}}')
    for question_id, question in questions.items():
        _check_question(_path("questions", question_id), question_id, question, codes)


def _check_content(body: Mapping, at: str) -> None:
    """Exactly one of `state` and `messages` in `body` (the request, or one of its `inputs` at `at`), well formed."""
    has_state, has_messages = body.get("state") is not None, body.get("messages") is not None
    if has_state == has_messages:
        _fail(_path(at, "state"), "send exactly one of `state` (a string) and `messages` (a chat history)",
              "missing_field" if not has_state else "state_and_messages", 'e.g. "state": "the text to judge"')
    if has_state and not isinstance(body["state"], str):
        _fail(_path(at, "state"), f"must be a string, not {_kind(body['state'])}", "wrong_type",
              'e.g. "state": "..."')
    if has_messages:
        _check_messages(body["messages"], _path(at, "messages"))


def _check_messages(messages, field: str = "messages") -> None:
    if not isinstance(messages, list) or not messages:
        _fail(field, "must be a non-empty array of messages", "wrong_type",
              '"messages": [{"role": "user", "content": "..."}]')
    for i, message in enumerate(messages):
        at = _path(field, i)
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            _fail(at, "a message is an object with a `role` string and a `content`", "wrong_type",
                  '{"role": "user", "content": "..."}')
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        for j, part in enumerate(parts):
            where = _path(_path(at, "content"), j) if isinstance(content, list) else _path(at, "content")
            if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str)):
                continue
            if isinstance(part, Mapping) and part.get("type") in MEDIA_PART_TYPES:
                continue  # read where the content is compiled, by the one reader of parts (content_parts.py)
            if isinstance(part, Mapping) and isinstance(part.get("type"), str) and part["type"] != "text":
                _fail(_path(where, "type"), f"content parts of type {part['type']!r} are not read",
                      "unsupported_content", "the part types are " + ", ".join(PART_TYPES))
            _fail(where, "content is a string or an array of content parts ({\"type\": \"text\", \"text\": ...}, "
                  "image_url, input_audio, video_url, video)", "wrong_type", '"content": "..."')


def _check_question(at: str, question_id, question, codes: tuple[str, ...] = ()) -> None:
    if not question_id:
        _fail(at, "a question id is a non-empty string", "invalid_value", 'e.g. "spam"')
    if not isinstance(question, Mapping):
        _fail(at, f"a question is an object, not {_kind(question)}", "wrong_type",
              '{"type": "noul", "instructions": "Is this message spam?"}')
    for key in question:
        if key not in QUESTION_KEYS:
            _unknown(at, key, QUESTION_KEYS)
    kind = question.get("type")
    if kind not in TYPES:
        _fail(_path(at, "type"), f"unknown question type {kind!r}" if kind is not None else "missing",
              "unknown_question_type" if kind is not None else "missing_field", "the types are " + ", ".join(TYPES))
    instructions = question.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        _fail(_path(at, "instructions"), "must be a non-empty string: the question to answer", "missing_field"
              if instructions is None else "invalid_value", '"instructions": "Is this message spam?"')
    criteria, where = question.get("criteria"), _path(at, "criteria")
    if codes:
        _check_code_question(at, kind, criteria, codes)
        return
    if kind == "noul" and criteria is not None and not isinstance(criteria, str):
        _fail(where, f"must be a string (what makes the answer true), not {_kind(criteria)}", "wrong_type",
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


def _check_code_question(at: str, kind: str, criteria, codes: tuple[str, ...]) -> None:
    """A question to a decision model: a choice over its codes, the criteria (code -> description) naming codes of
    the model, or absent (every code); noul and score ask for text labels, which its head does not read."""
    listed = ", ".join(map(repr, codes[:8])) + (", ..." if len(codes) > 8 else "")
    if kind != "choice":
        _fail(_path(at, "type"), f"a {kind} question asks for text labels, and this model is a decision model: its "
              f"head reads {len(codes)} codes", "options_on_decision_model",
              'ask a choice over its codes: {"type": "choice", "instructions": "..."} (GET /v1/models lists them)')
    where = _path(at, "criteria")
    if criteria is None:
        return
    if not isinstance(criteria, Mapping) or not criteria:
        _fail(where, "a choice's criteria map codes of the model to descriptions, or are left out (every code)",
              "invalid_choice_criteria", f'"criteria": {{{json.dumps(codes[0])}: "what it means"}}')
    for key, description in criteria.items():
        if key not in codes:
            _fail(_path(where, key), f"{key!r} is not a code of this decision model", "unknown_code",
                  f"its codes are {listed} (GET /v1/models lists them all)")
        if not isinstance(description, str):
            _fail(_path(where, key), "a code's description is a string (it may be empty)", "invalid_value",
                  f'{json.dumps(key)}: "what it means"')
