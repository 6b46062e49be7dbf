"""A program that reads its contents (prompt logprobs): layout lists every content row, the verifier holds it to
that, lowering gathers those rows, and the printer says so."""

from __future__ import annotations

import attrs

from spinfc.backend.launch import lower
from spinfc.ir.printer import print_ir
from spinfc.ir.verifier import IRVerifyError, verify
from spinfc.runtime.launch.prompt_logprobs import prompt_program, trimmed_rows

PROMPTS = [(2, 10, 11, 12, 13), tuple(range(20, 150)), (2, 7)]


def test_every_content_row_is_listed_once_in_row_order_and_the_program_verifies():
    program = verify(prompt_program(PROMPTS, "m", budget=256, block=128))
    rows = [(c.content, c.position) for lay in program.layouts for c in lay.content_rows]
    assert sorted(rows) == sorted((i, k) for i, p in enumerate(PROMPTS) for k in range(len(p)))
    for lay in program.layouts:
        assert [c.row for c in lay.content_rows] == sorted(c.row for c in lay.content_rows)
        for c in lay.content_rows:
            assert lay.tokens[c.row] == PROMPTS[c.content][c.position] and lay.positions[c.row] == c.position
    assert len(program.layouts) == 2  # 130 tokens take two blocks; the two short prompts share the other pass


def test_the_verifier_refuses_missing_or_unwanted_content_rows():
    program = prompt_program(PROMPTS, "m", budget=256, block=128)
    lay = program.layouts[0]
    broken = attrs.evolve(program, layouts=(attrs.evolve(lay, content_rows=lay.content_rows[1:]),
                                            *program.layouts[1:]))
    try:
        verify(broken)
        raise AssertionError("the verifier accepted a missing content row")
    except IRVerifyError as error:
        assert "content rows" in str(error)
    unread = attrs.evolve(program, read_contents=False)
    try:
        verify(unread)
        raise AssertionError("the verifier accepted content rows in a program that does not read its contents")
    except IRVerifyError as error:
        assert "does not read its contents" in str(error)


def test_lowering_gathers_the_content_rows_and_the_printer_counts_them():
    program = prompt_program(PROMPTS, "m", budget=256, block=128)
    for lay in program.layouts:
        launch = lower(lay)
        assert launch.rows.tolist() == [c.row for c in lay.content_rows] and launch.read_row.numel() == 0
        stop = lay.spans[-1][1]
        assert trimmed_rows(lay, 128) == -(-stop // 128) * 128  # the rows up to the last span, in whole blocks
    assert "content rows read" in print_ir(program)
