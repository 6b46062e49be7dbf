"""The template syntax tree: one class per rule of template.lark, built by `lark.ast_utils.create_transformer`.

Each node holds its token (text and offset in the template) and lowers itself to an IR part with `lower(where)`,
where `where(offset)` is the node's place in the file. The error rules (unknown_slot, unclosed_slot, ...) lower
by raising their `TemplateError`, so each mistake has its own message and hint and nothing else decides it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lark import Token, ast_utils

from spinfc.errors import TemplateError
from spinfc.ir import nodes as ir

Where = Callable[[int], ir.SourceLoc]

SLOT_KINDS: dict[str, ir.SlotKind] = {
    "<?>": "options",
    "{?}": "options",
    "<*>": "text",
    "{*}": "text",
    "<n>": "number",
    "{n}": "number",
    "<$>": "amount",
    "{$}": "amount",
    "<gen>": "generate",
}

SLOTS_HINT = "the slots are <?> (options), <*> (text), <n> (number), <$> (amount) and <gen> (free text)"
LITERAL_HINT = "write \\< for a literal <, \\{ for a literal { and \\\\ for a literal \\"


class _Node(ast_utils.Ast):
    token: Token

    @property
    def offset(self) -> int:
        return self.token.start_pos or 0

    def lower(self, where: Where) -> ir.TemplatePart:
        raise NotImplementedError


@dataclass
class Start(_Node, ast_utils.AsList):
    parts: list[_Node]


@dataclass
class Literal(_Node):
    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        return ir.Text(str(self.token))


@dataclass
class Escape(_Node):
    """`\\<`, `\\{` or `\\\\`: the character after the backslash, as text."""

    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        return ir.Text(str(self.token)[1])


@dataclass
class Slot(_Node):
    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        return ir.SlotRef(SLOT_KINDS[str(self.token)], where(self.offset))


@dataclass
class Placeholder(_Node):
    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        return ir.Placeholder(str(self.token)[1:-1], where(self.offset))


@dataclass
class UnknownSlot(_Node):
    """`<foo>`: angle brackets around something that is not a slot."""

    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        raise TemplateError(
            f"unknown slot `{self.token}`",
            where(self.offset),
            code="unknown_slot",
            hint=f"{SLOTS_HINT}; {LITERAL_HINT}",
        )


@dataclass
class BadPlaceholder(_Node):
    """`{}`, `{1st}`, `{a-b}`: braces around something that is neither a hosted slot nor a placeholder name."""

    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        raise TemplateError(
            f"`{self.token}` is not a placeholder: a name is letters, digits and _, not starting with a digit",
            where(self.offset),
            code="bad_placeholder",
            hint=f"rename it, e.g. {{aspect}}; the hosted slots are {{?}} {{*}} {{n}} {{$}}; {LITERAL_HINT}",
        )


@dataclass
class UnclosedSlot(_Node):
    """`<?` or `{?` (and the other slots) with no closing bracket."""

    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        opened = str(self.token)
        close = ">" if opened[0] == "<" else "}"
        raise TemplateError(
            f"slot `{opened}` is not closed",
            where(self.offset),
            code="unclosed_slot",
            hint=f"close it: `{opened}{close}`; or {LITERAL_HINT}",
        )


@dataclass
class UnclosedPlaceholder(_Node):
    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        raise TemplateError(
            f"placeholder `{self.token}` is not closed",
            where(self.offset),
            code="unclosed_placeholder",
            hint=f"close it: `{self.token}}}`; or {LITERAL_HINT}",
        )


@dataclass
class StrayBracket(_Node):
    """A `<` or `{` that opens nothing, e.g. `3 < 5`."""

    token: Token

    def lower(self, where: Where) -> ir.TemplatePart:
        raise TemplateError(
            f"`{self.token}` opens no slot or placeholder",
            where(self.offset),
            code="stray_bracket",
            hint=f"{LITERAL_HINT}; {SLOTS_HINT}",
        )
