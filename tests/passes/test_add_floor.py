"""add-floor: one empty floor content, appended last, once."""

from __future__ import annotations

import pytest

from spinfc.errors import CompileError
from spinfc.ir import verify
from spinfc.ir.nodes import Content, Program
from spinfc.passes import add_floor

from .programs import option_query


def test_floor_is_appended_once():
    program = Program("m", (Content("a", "text"),), (option_query("q", "Q?", [" y"]),))
    once = verify(add_floor(program))
    assert once.contents == (Content("a", "text"), Content("floor", "", is_floor=True))
    assert add_floor(once) == once


def test_a_program_without_contents_still_gets_its_floor():
    assert add_floor(Program("m", (), ())).contents == (Content("floor", "", is_floor=True),)


def test_an_ordinary_content_named_floor_is_an_error():
    with pytest.raises(CompileError, match="'floor'") as caught:
        add_floor(Program("m", (Content("floor", "x"),), ()))
    assert caught.value.code == "reserved_content_id"
