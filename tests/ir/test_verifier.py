"""The verifier accepts what the passes build and names every invariant a broken program breaks."""

from __future__ import annotations

import attrs
import pytest

from spinfc.ir import IRVerifyError, verify
from spinfc.ir.nodes import Content, Option, OptionSlot, Pass, Placement, Read, TrieNode

from passes.programs import laid_out, option_query, tokenized


def compiled():
    """Two contents (the second is the floor), a shared stem, a two-token option and a text slot."""
    program = tokenized([[7, 8, 9], [7]], [([1, 2], [[3], [4, 5]]), ([1, 6], [[3]]), ([1, 2, 9], None)],
                        budget=64, block=16)
    return verify(laid_out(program))


def problems(program) -> list[str]:
    with pytest.raises(IRVerifyError) as caught:
        verify(program)
    return caught.value.problems


def assert_caught(program, fragment: str):
    found = problems(program)
    assert any(fragment in p for p in found), found


def replace_row(lay, field: str, row: int, value):
    values = list(getattr(lay, field))
    values[row] = value
    return attrs.evolve(lay, **{field: tuple(values)})


def with_layout(program, lay):
    return attrs.evolve(program, layouts=(lay,) + program.layouts[1:])


def test_the_passes_output_verifies():
    program = compiled()
    assert verify(program) is program


def test_duplicate_contents_and_floors():
    program = compiled()
    bad = attrs.evolve(program, contents=(program.contents[0], program.contents[0], program.contents[1],
                                          attrs.evolve(program.contents[1], id="f2", text="x")))
    found = problems(attrs.evolve(bad, trie=None, plan=None, layouts=None))
    assert any("content id 'c0' is used 2 times" in p for p in found)
    assert any("2 contents are marked as the floor" in p for p in found)
    assert any("the floor content 'f2' has text" in p for p in found)


def test_bad_queries():
    query = option_query("q", "Q?", [" y", " y", ""])
    program = attrs.evolve(compiled(), queries=compiled().queries + (query, attrs.evolve(query, slot=OptionSlot(()))))
    found = problems(program)
    assert any("query id 'q' is used 2 times" in p for p in found)
    assert any("duplicated options [' y']" in p for p in found)
    assert any("an option is empty" in p for p in found)
    assert any("option slot without options" in p for p in found)


def test_question_of_an_unknown_query_and_changed_options():
    program = compiled()
    q0 = program.questions[0]
    changed = attrs.evolve(q0, slot=OptionSlot(q0.slot.options[:1]))
    assert_caught(attrs.evolve(program, questions=(attrs.evolve(q0, query_id="nope"),) + program.questions[1:]),
                  "unknown query 'nope'")
    assert_caught(attrs.evolve(program, questions=(changed,) + program.questions[1:]), "options differ")


def test_missing_tokens_after_tokenize():
    program = compiled()
    q0 = program.questions[0]
    no_option_tokens = attrs.evolve(q0, slot=OptionSlot((Option("o0"),) + q0.slot.options[1:]))
    assert_caught(attrs.evolve(program, questions=(attrs.evolve(q0, tokens=()),) + program.questions[1:]),
                  "question 0 ('q0'): no prompt tokens after tokenize")
    assert_caught(attrs.evolve(program, questions=(no_option_tokens,) + program.questions[1:]),
                  "question 0 option 0 ('o0'): no tokens after tokenize")


def test_trie_with_unmerged_siblings_and_misplaced_reads():
    program = compiled()
    root = program.trie[0]
    assert_caught(attrs.evolve(program, trie=(root, TrieNode(1))), "roots repeat a token")
    stem = root.children[0]  # path (1, 2): reads question 0 options' first tokens
    moved = attrs.evolve(stem, reads=stem.reads[:1])
    assert_caught(attrs.evolve(program, trie=(attrs.evolve(root, children=(moved,) + root.children[1:]),)),
                  "read (0, 1, 0) (question, option, step) appears 0 times")
    wrong = attrs.evolve(stem, reads=stem.reads + (Read(1, 0, 0, 3),))  # question 1's read at question 0's prompt
    found = problems(attrs.evolve(program, trie=(attrs.evolve(root, children=(wrong,) + root.children[1:]),)))
    assert any("read (1, 0, 0) sits at path (1, 2), it belongs at (1, 6)" in p for p in found)
    assert any("read (1, 0, 0) (question, option, step) appears 2 times" in p for p in found)
    bad_token = attrs.evolve(stem, reads=(Read(0, 0, 0, 99),) + stem.reads[1:])
    assert_caught(attrs.evolve(program, trie=(attrs.evolve(root, children=(bad_token,) + root.children[1:]),)),
                  "scores token 99, the option's token is 3")
    no_prompt = attrs.evolve(stem, prompts=())
    assert_caught(attrs.evolve(program, trie=(attrs.evolve(root, children=(no_prompt,) + root.children[1:]),)),
                  "the prompt end of question 0 appears 0 times")


def test_plan_misaligned_overlapping_over_budget_and_missing():
    program = compiled()
    (pss,) = program.plan.passes
    a, b = pss.placements

    def plan_with(*placements):
        return attrs.evolve(program, layouts=None, plan=attrs.evolve(program.plan, passes=(Pass(0, placements),)))

    assert_caught(plan_with(a, attrs.evolve(b, start=b.start + 1)), "starts at 17, not a block multiple")
    assert_caught(plan_with(a, attrs.evolve(b, start=0)), "overlap")
    assert_caught(plan_with(a, attrs.evolve(b, start=64)), "past the budget 64")
    assert_caught(plan_with(b), "content 1 is placed 0 times, not once")
    assert_caught(plan_with(a, b, Placement(1, 32, b.length)), "content 1 is placed 2 times")
    assert_caught(plan_with(a, attrs.evolve(b, length=b.length + 1)), "has length")


def test_layout_ends_positions_padding_and_reads():
    program = compiled()
    lay = program.layouts[0]
    # the floor first (a text slot extracts, and a content's decode reads its floor's contexts):
    # floor 0..5 | padding 6..15 | rows 16:7 17:8 18:9 | 19:1 20:2 21:4 22:9 23:6
    assert lay.spans == ((0, 6), (16, 24)) and lay.ends[16:24] == (24, 24, 24, 24, 23, 22, 23, 24)
    assert_caught(with_layout(program, replace_row(lay, "ends", 21, 21)), "row 21 has end 21, outside (21, 24]")
    assert_caught(with_layout(program, replace_row(lay, "ends", 21, 25)), "row 21 has end 25, outside (21, 24]")
    assert_caught(with_layout(program, replace_row(lay, "ends", 16, 23)), "content row 16 ends at 23")
    assert_caught(with_layout(program, replace_row(lay, "positions", 20, 7)), "row 20 has position 7, its depth is 4")
    assert_caught(with_layout(program, replace_row(lay, "tokens", 17, 42)), "do not hold content 0's tokens")
    assert_caught(with_layout(program, replace_row(lay, "ends", 13, 15)), "padding row 13 is not")
    # row 21 (option token 4, under row 20 which ends at 23) made to end at 24, past its parent's subtree
    assert_caught(with_layout(program, replace_row(lay, "ends", 21, 24)),
                  "row 21's subtree (to 24) leaves its parent row 20")
    read = lay.reads[0]
    assert_caught(with_layout(program, attrs.evolve(lay, reads=(attrs.evolve(read, row=read.row + 1),) + lay.reads[1:])),
                  "does not see the content, prompt and option prefix")
    assert_caught(with_layout(program, attrs.evolve(lay, reads=lay.reads[1:])), "appears 0 times")
    assert_caught(with_layout(program, attrs.evolve(lay, spans=lay.spans[:1])), "spans")
    assert_caught(attrs.evolve(program, layouts=()), "one per pass")


def test_every_problem_is_listed_not_only_the_first():
    program = compiled()
    lay = program.layouts[0]
    bad = replace_row(replace_row(lay, "positions", 4, 7), "ends", 13, 15)
    bad = attrs.evolve(program, contents=program.contents + (Content("c0", "again"),), layouts=(bad,))
    found = problems(bad)
    assert len(found) >= 4  # duplicate id, an unplaced content, a position, a padding row
    assert "IR invalid" in str(IRVerifyError(found))
