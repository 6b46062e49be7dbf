"""The depth check on a body's raw bytes (json_body.nesting_depth): brackets outside strings, escapes read as JSON
reads them, well-formed or not."""

from __future__ import annotations

import json
import random

import pytest

from spinfc.frontend.json_body import MAX_DEPTH, check_depth, nesting_depth
from spinfc.errors import RequestError


def walked(raw: bytes) -> int:
    """The definition, one byte at a time: a backslash and the backslash or quote after it are skipped (in a string,
    JSON's escapes; outside one, the body is malformed anyway); a quote opens or closes a string; brackets count
    outside strings only."""
    depth = deepest = i = 0
    inside = False
    while i < len(raw):
        char, i = chr(raw[i]), i + 1
        if char == "\\" and i < len(raw) and chr(raw[i]) in '\\"':
            i += 1
        elif char == '"':
            inside = not inside
        elif not inside and char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and char in "]}":
            depth -= 1
    return deepest


@pytest.mark.parametrize("raw, depth", [
    (b"", 0), (b"5", 0), (b"[]", 1), (b'{"a": [{"b": []}]}', 4), (b'["[[[", "]"]', 1),
    (b'["\\"[[", []]', 2), (b'["\\\\", [[]]]', 3), (b'["\\\\\\"[", []]', 2), (b'["\\n\\"", [[]]]', 3),
    (b'[[["open [[[[[', 3), (b"]]]][", 0),
])
def test_depth_of_shapes_that_mislead(raw: bytes, depth: int) -> None:
    assert nesting_depth(raw) == depth == walked(raw)


def test_random_bytes_of_brackets_quotes_and_backslashes() -> None:
    """Malformed text included: an open string, a closing bracket first, escapes outside strings."""
    rng = random.Random(7)
    for _ in range(5000):
        raw = bytes(rng.choice(b'[[{{]]}}""\\\\\\an') for _ in range(rng.randint(0, 48)))
        assert nesting_depth(raw) == walked(raw), raw


def test_json_with_escaped_texts() -> None:
    rng = random.Random(3)
    for _ in range(200):
        text = "".join(rng.choice('ab"\\[]{}\n') for _ in range(rng.randint(0, 30)))
        value: object = text
        for _ in range(rng.randint(0, 12)):
            value = rng.choice(([value, text], {"k" + text: value}))
        raw = json.dumps(value).encode()
        assert nesting_depth(raw) == walked(raw)


def test_check_depth_refuses_past_the_limit_only() -> None:
    check_depth(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    with pytest.raises(RequestError) as refused:
        check_depth(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert refused.value.code == "too_deeply_nested"
