"""Parse a template string (template.lark) into the IR `Template`: text, placeholders and at most one slot.

    parse_template("\\n\\nIs it about {topic}?\\nAnswer:<?>", SourceLoc("pack.toml", 12, 12))
      -> Template(parts=(Text("\\n\\nIs it about "), Placeholder("topic"), Text("?\\nAnswer:"), SlotRef("options")))

Line and column in errors and in the parts' `loc` are absolute in the file: `loc` is where the template's first
character is, and newlines inside the template advance the line. A caller whose string was decoded from
escapes (a TOML basic string) passes `locate`, which maps each character of `source` to its place in the file.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable

from lark import Lark, UnexpectedInput, ast_utils

from spinfc.errors import TemplateError
from spinfc.frontend import syntax
from spinfc.ir.nodes import Placeholder, SlotRef, SourceLoc, Template, TemplatePart, Text

Locate = Callable[[int], SourceLoc]

_PARSER = Lark.open(
    "template.lark",
    rel_to=__file__,
    parser="lalr",
    lexer="basic",
    transformer=ast_utils.create_transformer(syntax),
)


def offset_locator(source: str, loc: SourceLoc) -> Locate:
    """Character index in `source` -> file place, for a template whose first character is at `loc`."""
    line_starts = [0] + [i + 1 for i, c in enumerate(source) if c == "\n"]

    def locate(index: int) -> SourceLoc:
        line = bisect.bisect_right(line_starts, index) - 1
        column = index - line_starts[line] + (loc.column if line == 0 else 1)
        return SourceLoc(loc.file, loc.line + line, column)

    return locate


def escape_text(text: str) -> str:
    """`text` as template source that parses back to exactly `text`: `\\`, `<` and `{` escaped."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace("{", "\\{")


def parse_template(source: str, loc: SourceLoc, *, slots_allowed: int = 1, locate: Locate | None = None) -> Template:
    """Parse `source`; raise `TemplateError` (with code, file place and hint) at the first mistake.

    Guarantees on the result: adjacent text is merged, escapes are resolved, there are at most `slots_allowed`
    slots, some text or placeholder comes before the slot, and nothing but text follows it.

    Without `locate` the result is a function of (source, loc, slots_allowed) alone, and is remembered for the
    most recent TEMPLATES_REMEMBERED of them: a server is sent the same questions over and over, and parsing is
    most of a small request's compile. (A `Template` is immutable; a template that fails is parsed again.)"""
    if locate is None:
        return _parse_remembered(source, loc, slots_allowed)
    return _parse(source, loc, slots_allowed, locate)


TEMPLATES_REMEMBERED = 2048


@functools.lru_cache(maxsize=TEMPLATES_REMEMBERED)
def _parse_remembered(source: str, loc: SourceLoc, slots_allowed: int) -> Template:
    return _parse(source, loc, slots_allowed, None)


def _parse(source: str, loc: SourceLoc, slots_allowed: int, locate: Locate | None) -> Template:
    where = locate or offset_locator(source, loc)
    try:
        tree: syntax.Start = _PARSER.parse(source)
    except UnexpectedInput as error:  # the grammar accepts every string; this is a guard, not a path
        raise TemplateError(
            "the template does not parse", where(error.pos_in_stream or 0), code="syntax", hint=syntax.LITERAL_HINT
        ) from error
    parts = _merge_text(node.lower(where) for node in tree.parts)
    _check_slots(parts, slots_allowed)
    return Template(source=source, parts=parts, loc=loc)


def _merge_text(parts) -> tuple[TemplatePart, ...]:
    merged: list[TemplatePart] = []
    for part in parts:
        if isinstance(part, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + part.text)
        else:
            merged.append(part)
    return tuple(p for p in merged if not (isinstance(p, Text) and not p.text))


def _check_slots(parts: tuple[TemplatePart, ...], slots_allowed: int) -> None:
    slots = [p for p in parts if isinstance(p, SlotRef)]
    if len(slots) > slots_allowed:
        extra = slots[slots_allowed]
        if slots_allowed == 0:
            raise TemplateError(
                "a slot is not allowed here",
                extra.loc,
                code="slot_not_allowed",
                hint="this text only presents the content; questions and their slots go under [[questions]]",
            )
        raise TemplateError(
            f"a template holds one slot; this is another (the first is at {slots[0].loc.line}:{slots[0].loc.column})",
            extra.loc,
            code="too_many_slots",
            hint="split it into one question per slot; text shared at the start is read once either way",
        )
    if not slots:
        return
    at = parts.index(slots[0])
    if at == 0:
        raise TemplateError(
            "the slot has no text before it: the model would answer nothing",
            slots[0].loc,
            code="no_text_before_slot",
            hint='write the question before the slot, e.g. "\\n\\nIs the message spam?\\nAnswer:<?>"',
        )
    late = next((p for p in parts[at + 1 :] if isinstance(p, Placeholder)), None)
    if late is not None:
        raise TemplateError(
            f"placeholder {{{late.name}}} comes after the slot, where it is never read",
            late.loc,
            code="placeholder_after_slot",
            hint="move it before the slot; text after a slot only ends an extracted answer",
        )
