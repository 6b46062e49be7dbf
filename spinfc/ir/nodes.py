"""The IR: frozen attrs nodes, changed only with `attrs.evolve`.

A `Program` moves through the passes in `spinfc.passes.PIPELINE`; each pass fills in one more field:

    frontend            -> contents, queries          (templates parsed, nothing expanded)
    expand-placeholders -> questions                  (one per combination of placeholder values)
    add-floor           -> contents gains the floor   (the same questions on empty content)
    tokenize            -> tokens on contents, questions and options
    dedupe-prefixes     -> trie                       (the question tree shared by every content)
    plan-packing        -> plan                       (which content goes in which pass, where)
    layout              -> layouts                    (per pass: ids, positions, end[], answer reads)

Every content of a program is asked the same questions, so one trie serves them all: it hangs below each
content's last token.
"""

from __future__ import annotations

from typing import Literal, Union

import attrs
from attrs import frozen, field

SlotKind = Literal["options", "text", "number", "amount", "generate"]


@frozen
class SourceLoc:
    """Where a node came from, for error messages: a file (or `<request>`), 1-based line and column."""

    file: str
    line: int = 1
    column: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


# ---- templates (the frontend's output) ------------------------------------------------------------------


@frozen
class Text:
    text: str


@frozen
class Placeholder:
    name: str
    loc: SourceLoc


@frozen
class SlotRef:
    kind: SlotKind
    loc: SourceLoc


TemplatePart = Union[Text, Placeholder, SlotRef]


@frozen
class Template:
    """A parsed template: text, placeholders and at most one slot, in order."""

    source: str
    parts: tuple[TemplatePart, ...]
    loc: SourceLoc

    @property
    def slot(self) -> SlotRef | None:
        return next((p for p in self.parts if isinstance(p, SlotRef)), None)

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.name for p in self.parts if isinstance(p, Placeholder)))


# ---- slots ------------------------------------------------------------------------------------------------


@frozen
class Option:
    """One answer option: its text and, after tokenize, its token ids (without special tokens)."""

    text: str
    tokens: tuple[int, ...] = ()


@frozen
class OptionSlot:
    options: tuple[Option, ...]


@frozen
class TextSlot:
    """`<*>`: the `beam_width` most likely short answers, searched; each ends at `stop` (the template text after the
    slot; empty: a newline or the end of the turn). At most `max_tokens` tokens, the terminator included."""

    stop: str = ""
    max_tokens: int = 16
    beam_width: int = 4


@frozen
class NumberSlot:
    """`<n>`: the most likely numbers (sign, digits, thousands separators, decimal point), searched like `<*>`."""

    stop: str = ""
    max_tokens: int = 12
    beam_width: int = 4


@frozen
class AmountSlot:
    """`<$>`: the most likely amounts (a currency symbol or ISO code, and a number), searched like `<*>`."""

    stop: str = ""
    max_tokens: int = 16
    beam_width: int = 4


@frozen
class GenerateSlot:
    """`<gen>`: free text, greedy (`temperature` 0) or sampled (with `seed`), until `stop`, the end of the turn or
    `max_tokens` tokens."""

    stop: str = ""
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int | None = None


SEARCHED_SLOTS = (TextSlot, NumberSlot, AmountSlot)
EXTRACTION_SLOTS = (TextSlot, NumberSlot, AmountSlot, GenerateSlot)


Slot = Union[OptionSlot, TextSlot, NumberSlot, AmountSlot, GenerateSlot]


# ---- queries and questions ----------------------------------------------------------------------------------


@frozen
class Query:
    """A question as written: a template with one slot, and the values of its placeholders."""

    id: str
    template: Template
    slot: Slot
    placeholders: tuple[tuple[str, tuple[str, ...]], ...] = ()


@frozen
class Question:
    """One combination of a query's placeholder values: the filled text before the slot, and the slot."""

    query_id: str
    values: tuple[tuple[str, str], ...]
    prompt: str
    slot: Slot
    tokens: tuple[int, ...] = ()


@frozen
class Content:
    """One content read once; `is_floor` marks the empty content that gives `floor_p`."""

    id: str
    text: str
    is_floor: bool = False
    tokens: tuple[int, ...] = ()


# ---- the question tree ----------------------------------------------------------------------------------------


@frozen
class Read:
    """Score `token` as step `step` of option `option` of question `question`, at the row of the node holding it."""

    question: int
    option: int
    step: int
    token: int


@frozen
class TrieNode:
    """One token of the question tree; `reads` are scored from this token's output (its next-token logits)."""

    token: int
    children: tuple["TrieNode", ...] = ()
    reads: tuple[Read, ...] = ()
    # questions whose prompt ends at this token: extraction slots start decoding from this token's output
    prompts: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return 1 + sum(child.size for child in self.children)


@frozen
class TrieRow:
    """One node of a trie in depth-first preorder (the order layout gives rows): its depth below the content,
    the number of nodes in its subtree (itself included), and its parent's index in the same list (-1: a root)."""

    node: TrieNode
    depth: int
    size: int
    parent: int


def preorder(trie: tuple[TrieNode, ...] | None) -> list[TrieRow]:
    """The trie's nodes in depth-first preorder, children in their order; iterative, so deep prompts are fine."""
    order: list[tuple[TrieNode, int, int]] = []
    stack = [(node, 0, -1) for node in reversed(trie or ())]
    while stack:
        node, depth, parent = stack.pop()
        index = len(order)
        order.append((node, depth, parent))
        stack.extend((child, depth + 1, index) for child in reversed(node.children))
    sizes = [1] * len(order)
    for index in range(len(order) - 1, -1, -1):
        parent = order[index][2]
        if parent >= 0:
            sizes[parent] += sizes[index]
    return [TrieRow(node, depth, sizes[i], parent) for i, (node, depth, parent) in enumerate(order)]


# ---- packing and layout ----------------------------------------------------------------------------------------


@frozen
class Placement:
    """Content `content` occupies rows [start, start + length) of its pass; start is a multiple of the block."""

    content: int
    start: int
    length: int


@frozen
class Pass:
    index: int
    placements: tuple[Placement, ...]

    @property
    def used(self) -> int:
        return sum(p.length for p in self.placements)


@frozen
class Plan:
    budget: int
    block: int
    passes: tuple[Pass, ...]


@frozen
class AnswerRead:
    """The logits at `row` score `token` for (content, question, option, step)."""

    row: int
    content: int
    question: int
    option: int
    step: int
    token: int


@frozen
class PromptRow:
    """Row `row` holds the last prompt token of question `question` under content `content` (where an
    extraction slot starts decoding)."""

    row: int
    content: int
    question: int


@frozen
class PassLayout:
    """One pass, ready to lower: per row a token id, a position and `end`; query i sees key j iff j <= i < end[j].

    Padding rows hold token `pad`, position 0 and end[j] = j + 1 (each sees only itself)."""

    index: int
    budget: int
    tokens: tuple[int, ...]
    positions: tuple[int, ...]
    ends: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]  # [start, stop) of each placed content with its tree
    reads: tuple[AnswerRead, ...]
    prompt_rows: tuple[PromptRow, ...] = ()


# ---- the program ------------------------------------------------------------------------------------------------


@frozen
class Program:
    model: str
    contents: tuple[Content, ...]
    queries: tuple[Query, ...]
    questions: tuple[Question, ...] = ()
    trie: tuple[TrieNode, ...] | None = None
    plan: Plan | None = None
    layouts: tuple[PassLayout, ...] | None = None
    # how a content is presented: the text around `{content}` (a pack's `presentation`; empty for a request)
    present_before: str = ""
    present_after: str = ""
    budget: int = 16384
    block: int = 128
    pad: int = 0  # the token id of padding rows: the tokenizer's pad id (set by tokenize), else 0
    stats: tuple[tuple[str, int], ...] = field(default=(), converter=tuple)

    def with_stat(self, name: str, value: int) -> "Program":
        kept = tuple((k, v) for k, v in self.stats if k != name)
        return attrs.evolve(self, stats=kept + ((name, value),))

    def stat(self, name: str, default: int = 0) -> int:
        return dict(self.stats).get(name, default)
