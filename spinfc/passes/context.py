"""What the passes are given, rather than look up: the model's tokenizer and the pass shapes."""

from __future__ import annotations

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


MEMO_ENTRIES = 100_000
SETS_REMEMBERED = 64  # query sets whose questions (and their tokens) are kept
SET_QUESTIONS_REMEMBERED = 4096  # a larger set is built every time: the kept sets stay bounded in size, not only count


def recalled(memo: dict | None, key: tuple):
    """A query or question set's value kept by `remember` (None if it was not, or was dropped since)."""
    return None if memo is None else memo.get("sets", {}).get(key)


def remember(memo: dict | None, key: tuple, value) -> None:
    """Keep a set's value (its questions) in `memo`: its most recent SETS_REMEMBERED sets of at most
    SET_QUESTIONS_REMEMBERED questions (all are dropped when it is full, as a stream of different sets would
    otherwise grow it without bound; a larger set is not kept)."""
    if memo is None or len(value) > SET_QUESTIONS_REMEMBERED:
        return
    sets = memo.setdefault("sets", {})
    if len(sets) >= SETS_REMEMBERED:
        sets.clear()
    sets[key] = value
