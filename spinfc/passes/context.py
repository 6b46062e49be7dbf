"""What the passes are given, rather than look up: the model's tokenizer and the pass shapes."""

from __future__ import annotations

from collections import OrderedDict

import attrs

from spinfc.shapes import Shapes


@attrs.frozen
class PassContext:
    """`tokenizer`: a transformers tokenizer (what `tokenize` encodes with); None compiles only up to tokenize.
    `shapes`: the pass shapes chosen at start-up (what `plan-packing` and `layout` pack into). `memo`: what the
    passes may reuse between compiles, each a pure function of its key: encodings (the same text always encodes
    the same with the same tokenizer), a query set's questions and their tokens, a question set's trie and rows.
    `codes`: a decision model's codes (the labels of its head, in head order); empty for a model that reads its
    vocabulary."""

    tokenizer: object = None
    shapes: Shapes = attrs.field(factory=Shapes)
    codes: tuple[str, ...] = ()
    # what reads a content's media (`towers.MediaReader`: the model's towers and the server's media policy); None
    # refuses media
    media: object = attrs.field(default=None, eq=False, repr=False)
    # kept between compiles by the context's owner (the engine: the same questions and options come in request
    # after request); bounded by MEMO_ENTRIES
    memo: dict = attrs.field(factory=dict, eq=False, repr=False)


# encodings of prompt and option texts kept before all are dropped (the question sets' entries stay): about 570 bytes a
# text of 15 tokens, so 9 MB when full; at 100,000 a stream of new question sets filled 56 MB over 1,400 requests
MEMO_ENTRIES = 16_384
SETS_REMEMBERED = 64  # question sets whose questions, tokens, trie and tree rows are kept (least recently used go)
ENTRIES_PER_SET = 4  # a query set's questions and their tokens, a question set's trie and its tree rows
SET_QUESTIONS_REMEMBERED = 4096  # a larger set is built every time: the kept sets stay bounded in size, not only count


def recalled(memo: dict | None, key: tuple):
    """A query or question set's value kept by `remember` (None if it was not, or was dropped since)."""
    sets = None if memo is None else memo.get("sets")
    if sets is None or key not in sets:
        return None
    sets.move_to_end(key)
    return sets[key]


def remember(memo: dict | None, key: tuple, value, questions: int | None = None) -> None:
    """Keep a set's value in `memo` (its questions, their tokens, its trie, its tree rows: each one entry, under a
    key naming what it is): the most recently used SETS_REMEMBERED sets' entries of sets of at most
    SET_QUESTIONS_REMEMBERED questions (`questions`; default `len(value)`), the least recently used dropped first.
    A stream of different sets (every request its own) would otherwise keep every trie it ever built."""
    if memo is None or (len(value) if questions is None else questions) > SET_QUESTIONS_REMEMBERED:
        return
    sets = memo.setdefault("sets", OrderedDict())
    sets[key] = value
    sets.move_to_end(key)
    while len(sets) > ENTRIES_PER_SET * SETS_REMEMBERED:
        sets.popitem(last=False)

