"""What the passes are given, rather than look up: the model's tokenizer and the pass shapes."""

from __future__ import annotations

import attrs

from spinfc.shapes import Shapes


@attrs.frozen
class PassContext:
    """`tokenizer`: a transformers tokenizer (what `tokenize` encodes with); None compiles only up to tokenize.
    `shapes`: the pass shapes chosen at start-up (what `plan-packing` and `layout` pack into). `memo`: encodings
    `tokenize` may reuse (pure: the same text always encodes the same with the same tokenizer)."""

    tokenizer: object = None
    shapes: Shapes = attrs.field(factory=Shapes)
    # encodings kept between compiles by the context's owner (the engine: the same questions and options come in
    # request after request); bounded by MEMO_ENTRIES
    memo: dict = attrs.field(factory=dict, eq=False, repr=False)


MEMO_ENTRIES = 100_000
