"""The common mistakes in a table or a JSON body, worded once: one code, one message and one hint per mistake,
whoever finds it (a pack file's `Fields`, a request body's struct check in json_body.py, the decisions
validator), so the same mistake reads the same over HTTP, in `spinfc compile` and in a pack file.

    unknown_field   a key the format does not have          hint: did you mean `options`? the fields here are ...
    missing_field   a required key left out                 hint: add it, e.g. ...
    wrong_type      a value of the wrong JSON kind          hint: write it as <kind>, e.g. ...
    invalid_value   the right kind, out of range or not one of the allowed values
    empty_list      a list that needs at least one item

`param` is always the JSON path of the field at fault (`scoring.queries[0].optons`); `json_path` writes it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

UNKNOWN_FIELD, MISSING_FIELD, WRONG_TYPE, INVALID_VALUE, EMPTY_LIST = (
    "unknown_field", "missing_field", "wrong_type", "invalid_value", "empty_list")

KIND_NAMES = {str: "a string", bool: "true or false", int: "an integer", float: "a number", Decimal: "a number",
              list: "a list", dict: "an object", type(None): "null"}
EXAMPLES = {"a string": '"..."', "an integer": "1", "a number": "0.5", "true or false": "true",
            "a list": '["..."]', "an object": "{...}", "a list of strings": '["a", "b"]'}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def json_path(parts: Sequence[str | int]) -> str:
    """("scoring", "queries", 2, "options") -> "scoring.queries[2].options"; a key that is not a plain name is
    quoted: ("questions", "a b") -> 'questions["a b"]'."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def kind_of(value: Any) -> str:
    """The JSON kind of a decoded value, as the messages name it: "a string", "an integer", "null", ..."""
    for kind, name in KIND_NAMES.items():
        if type(value) is kind:
            return name
    return type(value).__name__


def where(path: str) -> str:
    return f"`{path}`" if path else "the body"


def unknown_field(key: str, known: Iterable[str], at: str = "") -> tuple[str, str]:
    """(message, hint) for `key`, not one of `known`, in the object at `at`."""
    known = tuple(known)
    close = difflib.get_close_matches(key, known, n=1)
    guess = f"did you mean `{close[0]}`? " if close else "remove it; "
    inside = f" in `{at}`" if at else ""
    return f"unknown field `{key}`{inside}", f"{guess}the fields here are: {', '.join(known)}"


def missing_field(key: str, at: str = "", example: str | None = None) -> tuple[str, str]:
    """(message, hint) for the required `key` missing from the object at `at`."""
    inside = f" in `{at}`" if at else ""
    return f"missing `{key}`{inside}", f"add it, e.g. \"{key}\": {example}" if example else f"add `{key}`"


def wrong_type(path: str, expected: str, got: str, example: str | None = None) -> tuple[str, str]:
    """(message, hint) for a value of kind `got` ("a string", see `kind_of`) at `path`, which must be `expected`
    ("an integer", "a string or a list")."""
    message = f"{where(path)} must be {expected}, not {got}"
    if got == "a string" and expected in ("an integer", "a number", "true or false"):
        return message, f"write it without quotes, e.g. {EXAMPLES[expected]}"
    example = example or EXAMPLES.get(expected.split(" or ")[0])
    return message, f"write it as {expected}" + (f", e.g. {example}" if example else "")
