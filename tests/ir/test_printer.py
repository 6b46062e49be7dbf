"""print_ir: a stable text form of whatever stages are filled, compact for 16k-row passes."""

from __future__ import annotations

import attrs

from spinfc.ir import print_ir
from spinfc.passes import run
from spinfc.registry import load_tokenizer

from passes.programs import ctx_of, laid_out, tokenized
from passes.test_pipeline import program as gemma_program

SMALL = [[7, 8, 9], [7]], [([1, 2], [[3], [4, 5]]), ([1, 6], [[3]]), ([1, 2, 9], None)]

EXPECTED_TAIL = """trie (5 nodes, 8 tokens before dedupe)
  1  @0
    2  @1
      prompt end: q0 q0
      read q0 option 0 'o0' step 0 -> 3
      read q0 option 1 'o1' step 0 -> 4
      4  @2
        read q0 option 1 'o1' step 1 -> 5
      9  @2
        prompt end: q2 q2
    6  @1
      prompt end: q1 q1
      read q1 option 0 'o0' step 0 -> 3
segments (2: each content with its 5-row question tree, rows from 0)
  segment c0 'c0': 8 rows (3 content + 5 tree), 3 answer rows, 4 reads, 3 prompt rows
  segment c1 'c1': 6 rows (1 content + 5 tree), 3 answer rows, 4 reads, 3 prompt rows
plan (1 pass of 32 rows, block 16, 14 rows used of 32: 43.8% full)
  pass 0: 2 contents, 14 rows (43.8%)
    [0, 6) c1 'c1': 1 content + 5 tree tokens
    [16, 24) c0 'c0': 3 content + 5 tree tokens
tokens processed: 14 (each content once + its question tree; padding not counted)
one sequence per question: 28 (per content and question: content + prompt + each option's tokens but its last)
saving: 2.00x fewer tokens than one sequence per question
layout pass 0: 32 rows, 2 spans, 8 reads on 6 answer rows, 6 prompt rows
  [0, 6) span c1 'c1'
    [0, 1) content positions 0..0 end=6
    [1, 2) tree positions 1..1 end=6
    [2, 3) tree positions 2..2 end=5
    [3, 4) tree positions 3..3 end=4
    [4, 5) tree positions 3..3 end=5
    [5, 6) tree positions 2..2 end=6
  [6, 16) padding token=0 position=0 end=row+1
  [16, 24) span c0 'c0'
    [16, 19) content positions 0..2 end=24
    [19, 24) tree laid out as c1's (5 rows, same ends and positions relative to its first row)
  [24, 32) padding token=0 position=0 end=row+1
  decode plan pass 0: 1 slot decoded from the pass's keys and values
    one batch of at most 4 beams a step, at most 16 steps, then each searched answer read on the floor
    row 4 c1 (floor) q2 q2: its context kept (sees 3 rows); the contents' answers are read from here for floor_p
    row 22 c0 q2 q2: text, 4 beams, <= 16 tokens, from position 6, sees 5 rows; ([^\\n]+)(\\n)?
stats tree_tokens_before=8 tree_tokens=5 segment_rows=14 passes=1 rows_used=14
"""


def small():
    return laid_out(tokenized(*SMALL, budget=32, block=16))


def test_the_whole_text_of_a_small_program():
    text = print_ir(small())
    assert text.startswith("program model=test budget=32 block=16 pad=0\ncontents (2)\n  c0 'c0' text='content 0' tokens=3\n")
    assert text.endswith(EXPECTED_TAIL)


def test_only_filled_stages_are_printed():
    tokens_only = print_ir(tokenized(*SMALL))
    assert "questions (3)" in tokens_only and "prompt tokens (2): 1 2" in tokens_only
    assert "trie" not in tokens_only and "plan" not in tokens_only and "layout" not in tokens_only


def test_printing_is_stable():
    assert print_ir(small()) == print_ir(small())


def test_layout_of_16k_rows_is_summarised():
    program = attrs.evolve(gemma_program(), budget=16384, block=128)
    program = run(program, ctx_of(program, load_tokenizer("gemma3-270m")), verify=True)
    layout_lines = print_ir(program).split("layout pass 0")[1].splitlines()
    assert len(layout_lines) < 20
    assert "[134, 16384) padding token=0 position=0 end=row+1" in layout_lines[-2]


def test_a_tokenizer_shows_the_text_of_each_token():
    tokenizer = load_tokenizer("gemma3-270m")
    text = print_ir(run(gemma_program(), ctx_of(gemma_program(), tokenizer), until="dedupe-prefixes"), tokenizer)
    assert "2 '<bos>'" in text and "11262 ' yes'" in text
    assert "'\\n\\nRefund? Answer:'" in text  # a chain of trie nodes prints its decoded text
