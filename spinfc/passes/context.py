"""What the passes are given, rather than look up: the model's tokenizer and the pass shapes."""

from __future__ import annotations

import attrs

from spinfc.shapes import Shapes


@attrs.frozen
class PassContext:
    """`tokenizer`: a transformers tokenizer (what `tokenize` encodes with); None compiles only up to tokenize.
    `shapes`: the pass shapes chosen at start-up (what `plan-packing` and `layout` pack into)."""

    tokenizer: object = None
    shapes: Shapes = attrs.field(factory=Shapes)
