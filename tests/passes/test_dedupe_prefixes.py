"""dedupe-prefixes: shared prompt stems become one path; options keep all but their last token in the tree."""

from __future__ import annotations

from spinfc.ir import verify
from spinfc.ir.nodes import Read, preorder
from spinfc.passes import dedupe_prefixes
from spinfc.passes.dedupe_prefixes import trie_size

from .programs import tokenized


def paths(trie):
    """Every root-to-node token path, in preorder."""
    rows, out = preorder(trie), []
    for row in rows:
        out.append((out[row.parent] if row.parent >= 0 else ()) + (row.node.token,))
    return out


def test_shared_stems_merge_and_options_branch():
    program = verify(dedupe_prefixes(tokenized([[9]], [
        ([1, 2, 3], [[10], [11]]),
        ([1, 2, 4], [[10], [11]]),  # shares [1, 2]
        ([5], [[20, 21, 22], [20, 23], [24]]),  # options share their first token 20
    ])))
    assert paths(program.trie) == [
        (1,), (1, 2), (1, 2, 3), (1, 2, 4), (5,), (5, 20), (5, 20, 21),
    ]
    nodes = {path: row.node for path, row in zip(paths(program.trie), preorder(program.trie))}
    assert nodes[(1, 2, 3)].reads == (Read(0, 0, 0, 10), Read(0, 1, 0, 11))
    assert trie_size(program.trie) == len(preorder(program.trie)) == 7 and trie_size(None) == 0
    assert nodes[(5,)].reads == (Read(2, 0, 0, 20), Read(2, 1, 0, 20), Read(2, 2, 0, 24))
    assert nodes[(5, 20)].reads == (Read(2, 0, 1, 21), Read(2, 1, 1, 23))
    assert nodes[(5, 20, 21)].reads == (Read(2, 0, 2, 22),)
    assert nodes[(1, 2, 4)].prompts == (1,)
    # before: prompts 3 + 3 + 1, options' tokens but the last 0 + 0 + (2 + 1 + 0)
    assert (program.stat("tree_tokens_before"), program.stat("tree_tokens")) == (10, 7)


def test_a_prompt_continuing_another_questions_option_shares_its_node():
    # question 1's prompt [1, 2] is question 0's prompt [1] + its option's first token 2
    program = verify(dedupe_prefixes(tokenized([[9]], [([1], [[2, 3]]), ([1, 2], [[4]])])))
    assert paths(program.trie) == [(1,), (1, 2)]
    node = preorder(program.trie)[1].node
    assert node.reads == (Read(0, 0, 1, 3), Read(1, 0, 0, 4)) and node.prompts == (1,)


def test_identical_questions_share_one_path_and_keep_their_reads():
    program = verify(dedupe_prefixes(tokenized([[9]], [([1, 2], [[3]]), ([1, 2], [[3]])])))
    assert paths(program.trie) == [(1,), (1, 2)]
    assert preorder(program.trie)[1].node.reads == (Read(0, 0, 0, 3), Read(1, 0, 0, 3))


def test_text_slots_mark_their_prompt_end_and_read_nothing():
    program = verify(dedupe_prefixes(tokenized([[9]], [([1, 2], None)])))
    last = preorder(program.trie)[-1].node
    assert last.prompts == (0,) and last.reads == ()


def test_children_keep_first_reached_order():
    program = dedupe_prefixes(tokenized([[9]], [([3], [[1]]), ([1], [[1]]), ([2], [[1]])]))
    assert [node.token for node in program.trie] == [3, 1, 2]


def test_deep_prompts_do_not_recurse():
    prompt = list(range(1, 5001))
    program = dedupe_prefixes(tokenized([[9]], [(prompt, [[1]])]))
    assert program.stat("tree_tokens") == 5000
    assert preorder(program.trie)[-1].depth == 4999
