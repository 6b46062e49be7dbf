"""The decode plan of a laid-out program: which rows the extraction questions decode from, how, and under which
grammar. Not a pass of the pipeline (it adds nothing the engine needs: the layout's prompt rows are the plan); it
is what `spinfc compile --emit launches` prints, and the regular expressions the decode constrains tokens with.

    <*>   any text without the terminator, at least one character, then the terminator
    <n>   an optional space, a sign, digits (or groups of three with thousands separators), a decimal part
    <$>   an optional space, then a number written with `,` or `.` groups, a currency symbol, ISO code or word
          before it, after it or neither

The spaces a template writes before a searched slot (`A: <$>`) are the slot's `lead`: every answer starts with
them, in place of the optional space.
"""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import AmountSlot, GenerateSlot, NumberSlot, PassLayout, Program, TextSlot

NUMBER = r"[+\-]?([0-9]{1,3}(,[0-9]{3})+|[0-9]+)(\.[0-9]+)?"
# an amount's number is written either way: `1,250.00` (`,` groups, `.` decimals) or `1.250,00` (`.` groups, `,`
# decimals); `1,25` is a decimal comma, `1,250` a group (runtime/extract/amounts.py reads them)
GROUPED_POINT = r"[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?|[0-9]+(\.[0-9]+)?"
GROUPED_COMMA = r"[0-9]{1,3}(\.[0-9]{3})+(,[0-9]+)?|[0-9]+,[0-9]{1,2}"
AMOUNT_NUMBER = f"-?({GROUPED_POINT}|{GROUPED_COMMA})"
SYMBOLS = "$€£¥₹₩"
WORDS = "[Ee]uros?|[Dd]ollars?|[Pp]ounds?|[Yy]en|[Rr]upees?|[Ff]rancs?"
DOLLAR_PREFIXES = "US|A|C|HK|NZ|S|R"  # US$30, A$30, C$30, HK$30, NZ$30, S$30, R$30
CURRENCY = rf"([{SYMBOLS}]|({DOLLAR_PREFIXES})\$|[A-Z]{{3}}|{WORDS})"
# a currency before the number, after it, both or neither (the model may answer `1250` to "what amount?")
AMOUNT = rf"(-?{CURRENCY} ?)?{AMOUNT_NUMBER}( ?{CURRENCY})?"
_SPECIAL = set("\\^$.|?*+()[]{}-/\"'")


def terminator(stop: str) -> str:
    """What ends an answer of a slot whose template continues with `stop`: its first character, or "" (a newline
    or the end of the turn) when nothing follows."""
    return stop[:1]


def _escape(char: str) -> str:
    """`char` as a regex literal that xgrammar and Python's `re` both read: a backslash before a metacharacter,
    `\\uXXXX` for a control or separator character (xgrammar refuses a raw NUL or CR)."""
    if char in _SPECIAL:
        return "\\" + char
    if char == "\n":
        return r"\n"
    if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or char in "\u2028\u2029":
        return f"\\u{ord(char):04x}"
    return char


def slot_regex(kind: str, stop: str, lead: str = "") -> str:
    """The regular expression of a whole answer of a slot of `kind` (text, number, amount), terminator included.
    `lead`: the spaces every answer starts with (the slot's `lead`); without it a number or an amount may start
    with one space."""
    end = terminator(stop)
    space = "".join(map(_escape, lead)) if lead else " ?"
    if kind == "text":
        body = "".join(map(_escape, lead)) + f"[^{_escape(end or chr(10))}]+"
    elif kind == "number":
        body = f"{space}{NUMBER}"
    elif kind == "amount":
        body = f"{space}({AMOUNT})"
    else:
        raise ValueError(f"no grammar for a {kind} slot")
    # without a terminator the answer may also end with a stop token, which the matcher allows once it accepts
    return f"({body}){_escape(end)}" if end else f"({body})(\\n)?"




KINDS = {TextSlot: "text", NumberSlot: "number", AmountSlot: "amount", GenerateSlot: "generate"}


@attrs.frozen
class SlotDecode:
    """One extraction question on one placed content: decoded from `row` (its prompt's last token, at `position`),
    attending to `sees` rows of the pass; `beams` at once (1 for <gen>), at most `max_tokens` tokens."""

    row: int
    position: int
    sees: int
    content: int
    question: int
    kind: str
    beams: int
    max_tokens: int
    grammar: str  # the regular expression, or how a <gen> stops


def decode_plan(program: Program, layout: PassLayout) -> list[SlotDecode]:
    """The extraction questions of one pass, in row order."""
    plan = []
    for prompt in layout.prompt_rows:
        slot = program.questions[prompt.question].slot
        kind = KINDS.get(type(slot))
        if kind is None:
            continue
        sees = sum(1 for j in range(prompt.row) if layout.ends[j] > prompt.row and _same_span(layout, j, prompt.row))
        end = terminator(slot.stop)
        if kind == "generate":
            how = f"free text until {end or chr(10)!r} or the end of the turn"
            how += ", greedy" if slot.temperature == 0 else f", sampled at temperature {slot.temperature}"
            beams = 1
        else:
            how, beams = slot_regex(kind, slot.stop, slot.lead), slot.beam_width
        plan.append(SlotDecode(prompt.row, layout.positions[prompt.row], sees, prompt.content, prompt.question, kind,
                               beams, slot.max_tokens, how))
    return plan


def _same_span(layout: PassLayout, j: int, row: int) -> bool:
    return any(start <= j < stop and start <= row < stop for start, stop in layout.spans)
