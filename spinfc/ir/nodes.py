"""The IR: frozen attrs nodes, changed only with `attrs.evolve`.

A `Program` moves through the passes in `spinfc.passes.PIPELINE`; each pass fills in one more field:

    frontend            -> contents, queries          (templates parsed, nothing expanded)
    expand-placeholders -> questions                  (one per combination of placeholder values)
    add-floor           -> contents gains the floor   (the same questions on empty content)
    read-media          -> each media piece's `read`     (decoded and processed by the model's tower)
    tokenize            -> tokens on contents, questions and options (a media piece: its placeholders)
    dedupe-prefixes     -> trie                       (the question tree shared by every content)
    segment             -> segments                   (each content with its tree as rows from 0: what the
                                                        engine's scheduler packs, across requests)
    plan-packing        -> plan                       (which segment goes in which pass, where: the scheduler's
                                                        packer on this program alone)
    layout              -> layouts                    (per pass: ids, positions, end[], answer reads)

The engine compiles a request through `segment`; packing and layout then run in its scheduler over the segments
of every request in flight, with the same two functions the last two passes call.

Every content of a program is asked the same questions, so one trie serves them all: it hangs below each
content's last token.
"""

from __future__ import annotations

from functools import cached_property
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
    """`<?>`: the probability of each option continuing the text. With `codes`, the options are codes of a decision
    model's head (its labels, not text): each is one read of that code's row of the head, and an empty `options`
    (`codes = "all"`) is every code of the model, filled in by tokenize."""

    options: tuple[Option, ...]
    codes: bool = False


@frozen
class TextSlot:
    """`<*>`: the `beam_width` most likely short answers, searched; each ends at `stop` (the template text after the
    slot; empty: a newline or the end of the turn). At most `max_tokens` tokens, the terminator included. `lead`:
    the spaces the template writes before the slot, which begin every answer (expand-placeholders moves them out
    of the prompt, so an answer's first token may carry them, as ` $` does)."""

    stop: str = ""
    max_tokens: int = 16
    beam_width: int = 4
    lead: str = ""


@frozen
class NumberSlot:
    """`<n>`: the most likely numbers (sign, digits, thousands separators, decimal point), searched like `<*>`, among
    the numbers the content writes where it writes some; `free`: any number the model answers."""

    stop: str = ""
    max_tokens: int = 12
    beam_width: int = 4
    lead: str = ""  # as TextSlot's
    free: bool = False


@frozen
class AmountSlot:
    """`<$>`: the most likely amounts (a currency symbol or ISO code, and a number), searched like `<*>`, among the
    amounts the content writes (or its numbers, where it writes no amount); `free`: any amount the model answers."""

    stop: str = ""
    max_tokens: int = 16
    beam_width: int = 4
    lead: str = ""  # as TextSlot's
    free: bool = False


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
class MediaPiece:
    """An image, audio clip or video in a content: `at` is where it goes in the content's text (a character
    offset), `source` what the request sent (`spinfc.media.MediaSource`); the read-media pass adds `read` (the
    tower's `towers.MediaRead`: its placeholder tokens, which of them take embeddings, the processed tensors),
    tokenize `start` (the row of its first placeholder among the content's tokens)."""

    at: int
    source: object
    read: object = field(default=None, eq=False, repr=False)
    start: int = 0


@frozen
class Content:
    """One content read once; `is_floor` marks the empty content that gives `floor_p`. `media`: its images, audio
    and video, in text order (their embeddings overwrite their placeholder rows: part of the content's prefix)."""

    id: str
    text: str
    is_floor: bool = False
    tokens: tuple[int, ...] = ()
    media: tuple[MediaPiece, ...] = ()


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
class ContentRow:
    """Row `row` holds token `position` of content `content`. Listed only for a program with `read_contents`:
    every such row is gathered, and its output is the distribution of the content's next token (the prompt's
    logprobs of /v1/completions with `echo`), read from the same one pass."""

    row: int
    content: int
    position: int


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
    content_rows: tuple[ContentRow, ...] = ()  # with Program.read_contents: every content row, in row order


@frozen
class TreeRows:
    """The question tree as rows counted from 0, in depth-first preorder: what every segment of a program places
    after its content (adding the content's length L to each row, position and end), so laid out once per trie.

    A node at depth d (0 for a root) has position L + d; row k's `end` is L + ends[k] = L + k + its subtree's size, so
    query i sees key j iff j is i's ancestor-or-self."""

    tokens: tuple[int, ...]
    depths: tuple[int, ...]
    ends: tuple[int, ...]  # k + the subtree size of row k
    reads: tuple[tuple[int, Read], ...]  # (row, read), in row order
    prompts: tuple[tuple[int, int], ...]  # (row, question whose prompt ends there), in row order
    answer_rows: int  # distinct rows holding a read

    @classmethod
    def of(cls, trie: tuple[TrieNode, ...] | None) -> "TreeRows":
        rows = preorder(trie)
        reads = tuple((k, r) for k, row in enumerate(rows) for r in row.node.reads)
        return cls(tokens=tuple(row.node.token for row in rows), depths=tuple(row.depth for row in rows),
                   ends=tuple(k + row.size for k, row in enumerate(rows)), reads=reads,
                   prompts=tuple((k, q) for k, row in enumerate(rows) for q in row.node.prompts),
                   answer_rows=len({k for k, _ in reads}))


@frozen
class Segment:
    """One content with its question tree as rows counted from 0: placed at any multiple of the block, its rows,
    positions and mask relative to its start are the same, which is why its results do not depend on its neighbours.

    Held as the content's tokens and the program's shared `TreeRows`; the row lists (`tokens`, `positions`, `ends`,
    `reads`, `prompt_rows`, `content_rows`) are made from them when first asked for. The content takes rows [0, L)
    with positions 0..L-1 and `end` = the segment's length; the tree follows. `ends[j]` never reaches past the
    segment; `reads` and `prompt_rows` name rows of the segment."""

    content: int  # the content's index in its program
    content_tokens: tuple[int, ...]
    tree: TreeRows
    read_contents: bool = False  # `content_rows` lists every content row (`Program.read_contents`)
    media: tuple[MediaPiece, ...] = ()  # the content's media, each placed at its `start` row

    @property
    def length(self) -> int:
        return len(self.content_tokens) + len(self.tree.tokens)

    @property
    def rows(self) -> int:
        """Distinct answer rows: what the LM head computes for this segment."""
        return self.tree.answer_rows

    @property
    def read_count(self) -> int:
        """len(reads), without making them."""
        return len(self.tree.reads)

    @cached_property
    def tokens(self) -> tuple[int, ...]:
        return self.content_tokens + self.tree.tokens

    @cached_property
    def positions(self) -> tuple[int, ...]:
        length = len(self.content_tokens)
        return tuple(range(length)) + tuple(length + d for d in self.tree.depths)

    @cached_property
    def ends(self) -> tuple[int, ...]:
        length = len(self.content_tokens)
        return (self.length,) * length + tuple(length + end for end in self.tree.ends)

    @cached_property
    def reads(self) -> tuple[AnswerRead, ...]:
        length, index = len(self.content_tokens), self.content
        return tuple(AnswerRead(length + k, index, r.question, r.option, r.step, r.token) for k, r in self.tree.reads)

    @cached_property
    def prompt_rows(self) -> tuple[PromptRow, ...]:
        length = len(self.content_tokens)
        return tuple(PromptRow(length + k, self.content, q) for k, q in self.tree.prompts)

    @cached_property
    def content_rows(self) -> tuple[ContentRow, ...]:
        if not self.read_contents:
            return ()
        return tuple(ContentRow(k, self.content, k) for k in range(len(self.content_tokens)))


# ---- the program ------------------------------------------------------------------------------------------------


@frozen
class Program:
    model: str
    contents: tuple[Content, ...]
    queries: tuple[Query, ...]
    questions: tuple[Question, ...] = ()
    trie: tuple[TrieNode, ...] | None = None
    segments: tuple[Segment, ...] | None = None  # one per content, in content order
    plan: Plan | None = None
    layouts: tuple[PassLayout, ...] | None = None
    # how a content is presented: the text around `{content}` (a pack's `presentation`; empty for a request)
    present_before: str = ""
    present_after: str = ""
    budget: int = 16384
    block: int = 128
    pad: int = 0  # the token id of padding rows: the tokenizer's pad id (set by tokenize), else 0
    read_contents: bool = False  # layout lists every content row in `PassLayout.content_rows` (prompt logprobs)
    stats: tuple[tuple[str, int], ...] = field(default=(), converter=tuple)

    def with_stat(self, name: str, value: int) -> "Program":
        kept = tuple((k, v) for k, v in self.stats if k != name)
        return attrs.evolve(self, stats=kept + ((name, value),))

    def stat(self, name: str, default: int = 0) -> int:
        return dict(self.stats).get(name, default)
