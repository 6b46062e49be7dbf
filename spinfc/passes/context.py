"""What the passes are given, rather than look up: the model's tokenizer and the pass shapes."""

from __future__ import annotations

import attrs

from spinfc.shapes import Shapes


@attrs.frozen
class PassContext:
    """`tokenizer`: a transformers tokenizer (what `tokenize` encodes with); None compiles only up to tokenize.
    `shapes`: the pass shapes chosen at start-up (what `plan-packing` and `layout` pack into). `memo`: what the
    passes may reuse between compiles, each a pure function of its key: encodings (the same text always encodes
    the same with the same tokenizer), a query set's questions and their tokens, a question set's trie and rows."""

    tokenizer: object = None
    shapes: Shapes = attrs.field(factory=Shapes)
    # kept between compiles by the context's owner (the engine: the same questions and options come in request
    # after request); bounded by MEMO_ENTRIES
    memo: dict = attrs.field(factory=dict, eq=False, repr=False)


MEMO_ENTRIES = 100_000
