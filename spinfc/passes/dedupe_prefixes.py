"""dedupe-prefixes: the question trie, one tree of tokens shared by every content and hung below its last token."""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import OptionSlot, Program, Read, TrieNode
from spinfc.passes.context import recalled, remember


class _Node:
    """A trie node while it is built; frozen into a `TrieNode` at the end."""

    def __init__(self, token: int) -> None:
        self.token = token
        self.children: dict[int, _Node] = {}  # insertion order: the order paths were first added
        self.reads: list[Read] = []
        self.prompts: list[int] = []

    def child(self, token: int) -> "_Node":
        return self.children.setdefault(token, _Node(token))

    def freeze(self) -> TrieNode:
        """The frozen subtree, built children first without recursion (prompts may be thousands of tokens)."""
        order, stack = [], [self]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(node.children.values())
        frozen: dict[int, TrieNode] = {}
        for node in reversed(order):  # every child comes after its parent in `order`
            children = tuple(frozen.pop(id(child)) for child in node.children.values())
            frozen[id(node)] = TrieNode(node.token, children, tuple(node.reads), tuple(node.prompts))
        return frozen[id(self)]


def dedupe_prefixes(program: Program, memo: dict | None = None) -> Program:
    """Fill `program.trie` from the tokenized questions (from `memo` when the same question set was seen: the trie
    depends on the questions' tokens alone, and a server sees the same set request after request).

    Guarantees: every question's prompt tokens are one root-to-node path, and identical prefixes (stems shared
    across questions and placeholder combinations) are one path: siblings never hold the same token. Each
    question's prompt ends at a node listing it in `prompts`. For an option of n tokens the path continues with
    its first n - 1 tokens below the prompt (options sharing first tokens share nodes); the `Read` of step k sits
    on the node whose output predicts token k: the prompt's last node for step 0, the node of token k - 1 after.
    So every step of every option is read exactly once. Children keep the order in which questions first reach
    them (stable). Stats: tree_tokens_before (prompts + options' tokens but the last, no sharing), tree_tokens.
    """
    key = ("trie", tuple((q.tokens, tuple(o.tokens for o in q.slot.options) if isinstance(q.slot, OptionSlot)
                          else type(q.slot).__name__) for q in program.questions))
    kept = recalled(memo, key)
    if kept is not None:
        trie, before, size = kept
        return attrs.evolve(program, trie=trie).with_stat("tree_tokens_before", before).with_stat("tree_tokens", size)
    root = _Node(-1)
    for index, question in enumerate(program.questions):
        node = root
        for token in question.tokens:
            node = node.child(token)
        node.prompts.append(index)
        if isinstance(question.slot, OptionSlot):
            for option_index, option in enumerate(question.slot.options):
                at = node
                for step, token in enumerate(option.tokens):
                    at.reads.append(Read(index, option_index, step, token))
                    if step + 1 < len(option.tokens):
                        at = at.child(token)
    trie = root.freeze().children
    before = sum(
        len(q.tokens) + (sum(len(o.tokens) - 1 for o in q.slot.options) if isinstance(q.slot, OptionSlot) else 0)
        for q in program.questions
    )
    size = trie_size(trie)
    remember(memo, key, (trie, before, size), len(program.questions))
    program = attrs.evolve(program, trie=trie)
    return program.with_stat("tree_tokens_before", before).with_stat("tree_tokens", size)


def trie_size(trie: tuple[TrieNode, ...] | None) -> int:
    """The number of tokens (rows) the trie adds to each content: its node count (what `preorder` lists), counted
    without building the rows (the server's limits ask this of every request)."""
    count, stack = 0, list(trie or ())
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node.children)
    return count
