"""Properties of the template grammar on random input: it never fails but with a TemplateError, escaped text
always parses back to itself, and a template printed from its parts parses to the same parts."""

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.errors import TemplateError
from spinfc.frontend import escape_text, parse_template
from spinfc.ir.nodes import Placeholder, SlotRef, SourceLoc, Text

LOC = SourceLoc("t", 1, 1)
ALPHABET = st.sampled_from(list("ab <>{}\\?*$n_1\n"))  # the characters that matter to the grammar, and some text
SPELLING = {"options": "<?>", "text": "<*>", "number": "<n>", "amount": "<$>", "generate": "<gen>"}
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda name: name != "n")


def source_of(parts) -> str:
    """Print parts back as template source (text escaped, placeholders braced, slots in the angle spelling)."""
    out = []
    for part in parts:
        if isinstance(part, Text):
            out.append(escape_text(part.text))
        elif isinstance(part, Placeholder):
            out.append(f"{{{part.name}}}")
        else:
            out.append(SPELLING[part.kind])
    return "".join(out)


def shape(parts) -> list[tuple[str, str]]:
    """The parts without their places (a reprinted template may escape more, which moves later parts)."""
    return [
        (type(p).__name__, p.text if isinstance(p, Text) else p.name if isinstance(p, Placeholder) else p.kind)
        for p in parts
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=30))
def test_any_string_parses_or_raises_a_template_error(source):
    try:
        template = parse_template(source, LOC)
    except TemplateError as error:
        assert error.code and error.hint and error.loc.file == "t"
        assert 1 <= error.loc.line <= source.count("\n") + 1
        return
    assert shape(parse_template(source_of(template.parts), LOC).parts) == shape(template.parts)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_escaped_text_parses_back_to_itself(text):
    parts = parse_template(escape_text(text), LOC).parts
    assert parts == ((Text(text),) if text else ())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.text(ALPHABET, min_size=1, max_size=8), NAMES.map(lambda n: ("ph", n))), min_size=1),
    st.sampled_from(sorted(SPELLING) + ["{?}", "{*}", "{n}", "{$}"]),
)
def test_text_and_placeholders_then_a_slot(pieces, slot):
    source = "".join(escape_text(p) if isinstance(p, str) else f"{{{p[1]}}}" for p in pieces)
    spelling = SPELLING.get(slot, slot)
    template = parse_template(source + spelling, LOC)
    assert isinstance(template.parts[-1], SlotRef)
    assert template.parts[-1].loc.line == 1 + source.count("\n")
    assert template.parts[-1].loc.column == len(source) - source.rfind("\n")  # rfind is -1 without a newline
    expected = "".join(p if isinstance(p, str) else f"{{{p[1]}}}" for p in pieces)
    printed = "".join(p.text if isinstance(p, Text) else f"{{{p.name}}}" for p in template.parts[:-1])
    assert printed == expected
