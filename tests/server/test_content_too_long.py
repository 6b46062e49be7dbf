"""`content_too_long` has one source, `spinfc.errors.ContentTooLong`: the pass planner, the engine's intake, the
decision rounds and /v1/completions raise it, the HTTP layer maps it to a 400 (server/errors.py), and an input of
many that alone is too long is that input's error (server/per_input.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from spinfc.errors import ContentTooLong
from spinfc.server.errors import ApiError, error_body, to_api_error
from spinfc.server.per_input import at_input

ROOT = Path(__file__).resolve().parents[2]


def spelled_out(path: Path, code: str) -> list[int]:
    """Lines of `path` where `code` is a string of its own (not words in a docstring)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and node.value == code]


def test_the_code_is_spelled_out_in_one_place():
    found = {path.relative_to(ROOT).as_posix(): lines for path in sorted((ROOT / "spinfc").rglob("*.py"))
             if (lines := spelled_out(path, "content_too_long"))}
    assert list(found) == ["spinfc/errors.py"], f"raise spinfc.errors.ContentTooLong instead: {found}"


def test_the_http_layer_maps_it_to_a_400_with_its_hint_and_param():
    api = to_api_error(ContentTooLong("prompt has 600 tokens", hint="shorten it", param="prompt"))
    assert (api.status, api.code, api.message, api.param) == (400, "content_too_long",
                                                               "prompt has 600 tokens (shorten it)", "prompt")
    assert error_body(api).type == "invalid_request_error"


def test_one_input_too_long_is_that_inputs_error():
    index, api = at_input(ContentTooLong("a content with its questions needs 3000 rows", content=2))
    assert index == 2 and isinstance(api, ApiError)
    assert (api.status, api.code, api.param) == (400, "content_too_long", "inputs[2].messages")
    assert at_input(ContentTooLong("the floor alone does not fit")) is None  # the request's own: no input at fault


def constructed(path: Path) -> list[int]:
    """Lines of `path` that build a `ContentTooLong` with a message of their own."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ContentTooLong"]


def test_work_no_pass_holds_is_refused_in_one_set_of_words():
    """The planner, the intake and /v1/completions' prompts refuse through `plan_packing.too_long` (what needs how
    many rows, the shapes, and what to change); the decision rounds halve a round that does not fit, and name the
    question one alone does not fit in, with those words inside."""
    found = {path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "spinfc").rglob("*.py")) if constructed(path)}
    assert found == {"spinfc/passes/plan_packing.py", "spinfc/runtime/decisions/rounds.py"}


def test_a_prompt_and_a_content_too_long_say_the_same_things():
    from spinfc.passes.plan_packing import too_long
    from spinfc.shapes import Shapes

    shapes = Shapes(256, 32)
    prompt = too_long("prompt[1]", 300, shapes, param="prompt[1]")
    content = too_long("content 'input-0'", 300, shapes, answer_rows=4, tokens=280, content=0)
    for error in (prompt, content):
        assert "needs 300 rows" in error.message and "more than one pass holds (256 rows per pass" in error.message
        assert "--token-budget (a multiple of 32, at least 320)" in error.hint
    assert prompt.param == "prompt[1]" and content.content == 0
    assert "280 content tokens + 20 question-tree tokens) and 4 answer rows" in content.message
    assert "ask fewer questions" in content.hint and "ask fewer questions" not in prompt.hint
