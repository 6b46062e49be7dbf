"""add-floor: the floor content, the same questions asked on empty content (it gives `floor_p`)."""

from __future__ import annotations

import attrs

from spinfc.errors import CompileError
from spinfc.ir.nodes import Content, Program

FLOOR_ID = "floor"


def add_floor(program: Program) -> Program:
    """Append `Content(id="floor", text="", is_floor=True)` as the last content.

    Guarantees: exactly one content is the floor; when the program had none, the floor is appended last, and a
    program that already has its floor is returned unchanged (the pass is idempotent). The floor is presented like every other content (the program's
    `present_before` + "" + `present_after`), so `p - floor_p` is what the content's own text added.
    Raises `CompileError` when an ordinary content is already named `floor`.
    """
    if any(content.is_floor for content in program.contents):
        return program
    if any(content.id == FLOOR_ID for content in program.contents):
        raise CompileError(
            f"a content is named {FLOOR_ID!r}, which names the empty content that gives floor_p",
            code="reserved_content_id", hint="give that content another id",
        )
    floor = Content(id=FLOOR_ID, text="", is_floor=True)
    return attrs.evolve(program, contents=program.contents + (floor,))
