"""What tokenize does with a question's slot where the head reads codes (a decision model) or where a question asks
for codes: a code's "token" is its row of the head, and anything else a decision model cannot answer is refused.

    code_slot(slot, codes, ...)   an option slot of codes with each code's row index as its one token
                                  (`codes = "all"`: every code of the model, in head order)

The refusals (CompileError, a 400 with its code on every path): codes asked of a model whose head reads its
vocabulary (codes_without_decision_model), text options asked of a decision model (options_on_decision_model),
an extraction or generated slot asked of one (extraction_on_decision_model), a code the model does not have
(unknown_code).
"""

from __future__ import annotations

import attrs

from spinfc.errors import CompileError
from spinfc.ir.nodes import Option, OptionSlot, SourceLoc

_SLOT_NAMES = {"TextSlot": "<*>", "NumberSlot": "<n>", "AmountSlot": "<$>", "GenerateSlot": "<gen>"}


def code_slot(slot, codes: tuple[str, ...], name: str, loc: SourceLoc | None) -> OptionSlot:
    """`slot` (any slot of a question `name`) as a decision model (`codes`) or a vocabulary model (no codes) reads it:
    an option slot of codes gets its rows; a text option slot of a vocabulary model is returned unchanged."""
    if not codes:
        if isinstance(slot, OptionSlot) and slot.codes:
            raise CompileError(
                f"question {name} names codes, and this model's head reads its vocabulary: codes are the labels "
                "of a decision model's head", loc, code="codes_without_decision_model",
                hint='give the answers as options (options = [" yes", " no"]), or serve a decision model')
        return slot
    if not isinstance(slot, OptionSlot):
        kind = _SLOT_NAMES.get(type(slot).__name__, "an extraction slot")
        raise CompileError(
            f"question {name} asks for {kind}, and this model is a decision model: its head reads {len(codes)} "
            "codes, never text", loc, code="extraction_on_decision_model",
            hint='ask with an option slot <?> over its codes: codes = "all" (GET /v1/models lists them)')
    if not slot.codes:
        raise CompileError(
            f"question {name} gives text options, and this model is a decision model: its head reads "
            f"{len(codes)} codes, not text", loc, code="options_on_decision_model",
            hint='replace `options` with `codes = "all"` or a list of its codes (GET /v1/models lists them)')
    row = {code: index for index, code in enumerate(codes)}
    asked = slot.options or tuple(Option(code) for code in codes)
    for option in asked:
        if option.text not in row:
            listed = ", ".join(map(repr, codes[:8])) + (", ..." if len(codes) > 8 else "")
            raise CompileError(
                f"question {name} asks for code {option.text!r}, which the model does not have", loc,
                code="unknown_code", hint=f"its codes are {listed} (GET /v1/models lists them all)")
    return attrs.evolve(slot, options=tuple(attrs.evolve(o, tokens=(row[o.text],)) for o in asked))
