"""The frontend: templates (template.lark), pack files and request bodies -> the IR `Program`.

    parse_template(source, loc, *, slots_allowed=1) -> Template      escape_text(text) -> template source
    load_pack(path) -> Pack                          program_from_pack(pack, contents, model) -> Program
    program_from_request(body, model, source="<request>") -> Program
    validate_packs(directory) -> list[CompileError]

Every mistake is a `spinfc.errors.CompileError` with a code, a place (file, line, column or JSON path) and a hint.
"""

from spinfc.frontend.pack import Category, Condition, Decision, Member, Pack, Rule, program_from_pack
from spinfc.frontend.pack_reader import load_pack
from spinfc.frontend.request import program_from_request
from spinfc.frontend.template import escape_text, parse_template
from spinfc.frontend.validate import validate_packs

__all__ = [
    "parse_template",
    "escape_text",
    "load_pack",
    "Pack",
    "Category",
    "Member",
    "Condition",
    "Rule",
    "Decision",
    "program_from_pack",
    "program_from_request",
    "validate_packs",
]
