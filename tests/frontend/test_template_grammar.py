"""The template grammar: what parses to which IR parts, and one test per error kind (code, line, column, hint)."""

import pytest

from spinfc.errors import CompileError, TemplateError
from spinfc.frontend import parse_template
from spinfc.ir.nodes import Placeholder, SourceLoc, Text

LOC = SourceLoc("pack.toml", 7, 12)  # the template's first character is line 7, column 12 of the file


def kinds(source: str) -> list:
    out = []
    for part in parse_template(source, LOC).parts:
        if isinstance(part, Text):
            out.append(("text", part.text))
        elif isinstance(part, Placeholder):
            out.append(("placeholder", part.name))
        else:
            out.append(("slot", part.kind))
    return out


@pytest.mark.parametrize(
    "angle, hosted, kind",
    [("<?>", "{?}", "options"), ("<*>", "{*}", "text"), ("<n>", "{n}", "number"), ("<$>", "{$}", "amount")],
)
def test_both_spellings_give_the_same_slot(angle, hosted, kind):
    for spelling in (angle, hosted):
        assert kinds(f"Q?\nA:{spelling}") == [("text", "Q?\nA:"), ("slot", kind)]


def test_gen_slot_and_text_after_an_extraction_slot():
    assert kinds('Say "<gen>"') == [("text", 'Say "'), ("slot", "generate"), ("text", '"')]


def test_placeholders_in_order_and_deduplicated():
    template = parse_template("{a} and {b} or {a}?<?>", LOC)
    assert template.placeholders == ("a", "b")
    assert kinds("Is {topic_1} here?<?>")[:2] == [("text", "Is "), ("placeholder", "topic_1")]


def test_escapes_are_literal_and_merged_into_text():
    assert kinds(r"3 \< 5 and \{x} and \\ and C:\path?<?>") == [
        ("text", "3 < 5 and {x} and \\ and C:\\path?"),
        ("slot", "options"),
    ]


def test_trailing_backslash_is_literal():
    assert kinds("a\\") == [("text", "a\\")]


def test_plain_closing_brackets_are_text():
    assert kinds("a > b } c?<?>") == [("text", "a > b } c?"), ("slot", "options")]


def test_positions_are_absolute_in_the_file():
    template = parse_template("\n\nIs it about {topic}?\nAnswer:<?>", LOC)
    placeholder, slot = template.parts[1], template.parts[3]
    assert placeholder.loc == SourceLoc("pack.toml", 9, 13)  # two lines down, 13th character of its line
    assert slot.loc == SourceLoc("pack.toml", 10, 8)
    assert parse_template("x <?>", LOC).parts[1].loc == SourceLoc("pack.toml", 7, 14)  # same line: column offset


def test_locate_maps_decoded_characters():
    template = parse_template("ab <?>", LOC, locate=lambda i: SourceLoc("f", 1, 100 + i))
    assert template.slot.loc == SourceLoc("f", 1, 103)


def test_empty_template_and_presentation_without_slot():
    assert parse_template("", LOC).parts == ()
    assert kinds("Message:\n{content}") == [("text", "Message:\n"), ("placeholder", "content")]


# ---- one test per error kind ---------------------------------------------------------------------------------


def error_of(source: str, **kwargs) -> CompileError:
    with pytest.raises(TemplateError) as caught:
        parse_template(source, LOC, **kwargs)
    error = caught.value
    assert error.hint, "every template error says what to do"
    assert str(error).startswith(f"{error.loc}: error: ")
    assert "\n  hint: " in str(error)
    return error


def where(error: CompileError) -> tuple[str, int, int]:
    return error.code, error.loc.line, error.loc.column


def test_unknown_slot():
    error = error_of("\n\nIs it spam?\nAnswer:<foo>")
    assert where(error) == ("unknown_slot", 10, 8)
    assert "<foo>" in error.message and "<?>" in error.hint


def test_empty_angle_brackets_are_an_unknown_slot():
    assert where(error_of("Answer: <>")) == ("unknown_slot", 7, 20)


def test_unclosed_angle_slot():
    error = error_of("Is it spam?\nAnswer:<?")
    assert where(error) == ("unclosed_slot", 8, 8)
    assert "<?>" in error.hint


def test_unclosed_hosted_slot():
    error = error_of("Answer:{? ")
    assert where(error) == ("unclosed_slot", 7, 19)
    assert "{?}" in error.hint


def test_unclosed_number_slot_but_not_a_word_starting_with_n():
    assert where(error_of("How many: <n")) == ("unclosed_slot", 7, 22)
    assert error_of("x <no").code == "stray_bracket"


def test_unclosed_placeholder():
    assert where(error_of("Is it about {topic?<?>")) == ("unclosed_placeholder", 7, 24)


def test_bad_placeholder_name():
    assert where(error_of("Is it about {}?<?>")) == ("bad_placeholder", 7, 24)
    assert error_of("About {1st}?<?>").code == "bad_placeholder"
    assert error_of("About {a-b}?<?>").code == "bad_placeholder"


def test_stray_bracket():
    error = error_of("Is 3 < 5?\nAnswer:<?>")
    assert where(error) == ("stray_bracket", 7, 17)
    assert "\\<" in error.hint


def test_more_than_one_slot():
    error = error_of("Name: <*>\nAge: <n>")
    assert where(error) == ("too_many_slots", 8, 6)
    assert "7:18" in error.message  # where the first slot is


def test_slot_not_allowed_in_a_presentation():
    assert where(error_of("Message: {content} <?>", slots_allowed=0)) == ("slot_not_allowed", 7, 31)


def test_no_text_before_the_slot():
    assert where(error_of("<?>")) == ("no_text_before_slot", 7, 12)


def test_placeholder_after_the_slot():
    assert where(error_of('Q: "<*>" {x}')) == ("placeholder_after_slot", 7, 21)
