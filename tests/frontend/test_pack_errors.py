"""Broken pack files: each error names file, line and column (of the key, the value, or the character in a
template), has a code and a hint; validate_packs lists every error of every file."""

import pytest

from spinfc.errors import CompileError, PackError, TemplateError
from spinfc.frontend import load_pack, validate_packs

HEADER = """id = "acme/test"
version = "1.0.0"
description = "A test pack."
models = ["gemma3-270m"]
presentation = "Message:\\n{content}"
"""

QUESTION = """
[[questions]]
id = "spam"
template = "\\n\\nIs the message spam?\\nAnswer:<?>"
options = [" yes", " no"]
"""


def write(tmp_path, body: str, name: str = "pack.toml"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def error_in(tmp_path, body: str) -> CompileError:
    path = write(tmp_path, body)
    with pytest.raises(CompileError) as caught:
        load_pack(path)
    error = caught.value
    assert error.loc.file == str(path)
    assert error.hint
    assert str(error).startswith(f"{path}:{error.loc.line}:{error.loc.column}: error: ")
    return error


def at(error: CompileError) -> tuple[str, int, int]:
    return error.code, error.loc.line, error.loc.column


def col(body: str, line: int, needle: str) -> int:
    """The 1-based column where `needle` starts on 1-based line `line` of `body`."""
    return body.splitlines()[line - 1].index(needle) + 1


def test_a_broken_template_names_file_line_and_column(tmp_path):
    body = HEADER + QUESTION.replace("Answer:<?>", "Answer:<foo>")
    error = error_in(tmp_path, body)
    assert isinstance(error, TemplateError)
    assert at(error) == ("unknown_slot", 9, 46)
    assert col(body, 9, "<foo>") == 46  # counted in the file, where `\\n` is two characters
    assert error.param == "questions[0].template"


def test_template_positions_count_escapes_in_the_toml_string(tmp_path):
    body = HEADER + QUESTION.replace('spam?\\nAnswer:<?>"', 'spam? \\"quoted\\" {x}\\nAnswer:<?>"')
    error = error_in(tmp_path, body)
    assert error.code == "placeholder_without_values"
    assert (error.loc.line, error.loc.column) == (9, col(body, 9, "{x}"))


def test_multiline_template_positions(tmp_path):
    body = HEADER + '\n[[questions]]\nid = "q"\ntemplate = """\nIs it spam?\nAnswer:<?"""\noptions = [" yes", " no"]\n'
    assert at(error_in(tmp_path, body)) == ("unclosed_slot", 11, 8)


def test_toml_syntax_error(tmp_path):
    error = error_in(tmp_path, HEADER + '\n[[questions]]\nid = "q"\ntemplate = "unterminated\n')
    assert at(error) == ("toml_syntax", 9, 25)
    assert error.message.startswith("not valid TOML")


def test_missing_and_wrong_header_keys(tmp_path):
    assert at(error_in(tmp_path, HEADER.replace('version = "1.0.0"\n', "") + QUESTION)) == ("missing_field", 1, 1)
    assert at(error_in(tmp_path, HEADER.replace('"acme/test"', '"no-namespace"') + QUESTION)) == ("invalid_value", 1, 6)
    assert at(error_in(tmp_path, HEADER.replace('"1.0.0"', "1") + QUESTION)) == ("wrong_type", 2, 11)
    error = error_in(tmp_path, HEADER + 'descripton = "typo"\n' + QUESTION)
    assert at(error) == ("unknown_field", 6, 1)
    assert "description" in error.hint


def test_presentation_must_hold_content_once(tmp_path):
    body = HEADER.replace("{content}", "{text}") + QUESTION
    assert at(error_in(tmp_path, body)) == ("unknown_placeholder", 5, 27)
    assert error_in(tmp_path, HEADER.replace("{content}", "none") + QUESTION).code == "missing_content"
    assert error_in(tmp_path, HEADER.replace("{content}", "{content}<?>") + QUESTION).code == "slot_not_allowed"


def test_option_errors(tmp_path):
    assert at(error_in(tmp_path, HEADER + QUESTION.replace('[" yes", " no"]', '[" yes", " yes"]'))) == (
        "duplicate_option",
        10,
        20,
    )
    assert at(error_in(tmp_path, HEADER + QUESTION.replace('[" yes", " no"]', '[" yes", ""]'))) == (
        "empty_option",
        10,
        20,
    )
    assert at(error_in(tmp_path, HEADER + QUESTION.replace('[" yes", " no"]', "[]"))) == ("no_options", 10, 11)
    no_options = HEADER + QUESTION.replace('options = [" yes", " no"]\n', "")
    assert at(error_in(tmp_path, no_options)) == ("no_options", 9, col(no_options, 9, "<?>"))
    extraction = HEADER + QUESTION.replace("Answer:<?>", "Answer:<*>")
    assert at(error_in(tmp_path, extraction)) == ("options_not_allowed", 10, 1)


def test_placeholder_errors(tmp_path):
    grid = QUESTION.replace("spam?", "about {topic}?") + 'placeholders = { topic = ["a", "a"] }\n'
    assert at(error_in(tmp_path, HEADER + grid)) == ("duplicate_value", 11, 32)
    unused = QUESTION + 'placeholders = { topic = ["a"] }\n'
    assert at(error_in(tmp_path, HEADER + unused)) == ("unused_placeholder", 11, 18)
    empty = QUESTION.replace("spam?", "about {topic}?") + "placeholders = { topic = [] }\n"
    assert error_in(tmp_path, HEADER + empty).code == "placeholder_without_values"


def test_question_errors(tmp_path):
    assert at(error_in(tmp_path, HEADER + QUESTION + QUESTION)) == ("duplicate_id", 13, 6)
    assert error_in(tmp_path, HEADER).code == "no_questions"
    error = error_in(tmp_path, HEADER + QUESTION.replace("Answer:<?>", "Answer:"))
    assert at(error) == ("missing_slot", 9, 12)


CATEGORY = """
[[categories]]
id = "junk"
combine = "noisy_or"
members = [{ question = "spam", option = " yes", weight = 0.5 }]
"""


def test_category_errors(tmp_path):
    base = HEADER + QUESTION
    assert at(error_in(tmp_path, base + CATEGORY.replace('"spam", option', '"spma", option'))) == (
        "unknown_question",
        15,
        25,
    )
    assert "'spam'" in error_in(tmp_path, base + CATEGORY.replace('"spam", option', '"spma", option')).hint
    body = base + CATEGORY.replace('" yes"', '"yes"')
    error = error_in(tmp_path, body)
    assert at(error) == ("unknown_option", 15, col(body, 15, '"yes"'))
    assert "leading space" in error.hint
    assert at(error_in(tmp_path, base + CATEGORY.replace("0.5", "1.5"))) == ("invalid_value", 15, 59)
    assert at(error_in(tmp_path, base + CATEGORY.replace('"noisy_or"', '"median"'))) == ("invalid_value", 14, 11)
    assert (
        error_in(
            tmp_path,
            base + CATEGORY.replace('members = [{ question = "spam", option = " yes", weight = 0.5 }]', "members = []"),
        ).code
        == "no_members"
    )


def test_member_values_must_exist(tmp_path):
    grid = QUESTION.replace("spam?", "about {topic}?") + 'placeholders = { topic = ["a", "b"] }\n'
    member = CATEGORY.replace("weight = 0.5", 'values = { topic = "c" }')
    assert at(error_in(tmp_path, HEADER + grid + member)) == ("unknown_value", 16, col(member, 5, '"c"'))
    member = CATEGORY.replace("weight = 0.5", 'values = { subject = "a" }')
    assert at(error_in(tmp_path, HEADER + grid + member)) == ("unknown_placeholder", 16, col(member, 5, "subject"))


DECISION = """
[decision]
default = "allow"

[[decision.rules]]
label = "block"
any = ["junk >= 0.8"]
"""


def test_decision_errors(tmp_path):
    base = HEADER + QUESTION + CATEGORY
    assert load_pack(write(tmp_path, base + DECISION)).decision.rules[0].conditions[0].threshold == 0.8
    assert at(error_in(tmp_path, base + DECISION.replace("junk >=", "jnk >="))) == ("unknown_category", 22, 8)
    assert at(error_in(tmp_path, base + DECISION.replace("junk >= 0.8", "junk is high"))) == ("bad_condition", 22, 8)
    assert error_in(tmp_path, base + DECISION.replace("any =", "every =")).code == "unknown_field"
    both = base + DECISION + 'all = ["junk < 0.1"]\n'
    assert at(error_in(tmp_path, both)) == ("bad_rule", 20, 1)
    assert error_in(tmp_path, base + DECISION.replace('default = "allow"\n', "")).code == "missing_field"


def test_validate_lists_every_error_of_every_file(tmp_path):
    write(tmp_path, HEADER + QUESTION, "a-good.toml")
    write(
        tmp_path,
        HEADER.replace("acme/test", "acme/other")
        + QUESTION.replace("<?>", "<foo>")
        + QUESTION.replace('"spam"', '"ham"').replace('[" yes", " no"]', '[" yes", " yes"]')
        + CATEGORY.replace('"spam", option', '"eggs", option'),
        "b-broken.toml",
    )
    write(tmp_path, HEADER + QUESTION, "c-same-id.toml")
    write(tmp_path, "id = [", "d-not-toml.toml")
    errors = validate_packs(tmp_path)
    found = [(e.loc.file.rsplit("/", 1)[1], e.code) for e in errors]
    assert found == [
        ("b-broken.toml", "unknown_slot"),
        ("b-broken.toml", "duplicate_option"),
        ("b-broken.toml", "unknown_question"),
        ("c-same-id.toml", "duplicate_pack_id"),
        ("d-not-toml.toml", "toml_syntax"),
    ]
    assert all(isinstance(e, CompileError) and e.hint and e.loc.line >= 1 for e in errors)


def test_validate_an_empty_or_missing_folder(tmp_path):
    assert [e.code for e in validate_packs(tmp_path)] == ["no_packs"]
    assert [e.code for e in validate_packs(tmp_path / "nope")] == ["not_a_folder"]


def test_errors_are_pack_errors_with_a_json_ready_form(tmp_path):
    error = error_in(tmp_path, HEADER + QUESTION + QUESTION)
    assert isinstance(error, PackError)
    assert error.as_dict()["loc"] == {"file": error.loc.file, "line": 13, "column": 6}
    assert error.as_dict()["code"] == "duplicate_id"


EXTRACTION = """
[[questions]]
id = "month"
template = "\\n\\nQ: Which month?\\nA: \\"<*>\\""
beam_width = 3

[[questions]]
id = "amount"
template = "\\n\\nQ: How much?\\nA: <$>\\n"
max_tokens = 10

[[questions]]
id = "summary"
template = "\\n\\nSummary:<gen>"
temperature = 0.7
seed = 5
"""


def test_extraction_questions_load_with_their_settings(tmp_path):
    pack = load_pack(write(tmp_path, HEADER + QUESTION + EXTRACTION))
    month, amount, summary = pack.queries[1:]
    assert (month.slot.beam_width, month.slot.stop) == (3, '"')
    assert (amount.slot.max_tokens, amount.slot.beam_width, amount.slot.stop) == (10, 4, "\n")
    assert (summary.slot.temperature, summary.slot.seed) == (0.7, 5)


@pytest.mark.parametrize("line, code, key", [
    ('beam_width = 0', "invalid_value", "beam_width"),
    ('temperature = 0.5', "not_allowed", "temperature"),
    ('seed = 3', "not_allowed", "seed"),
    ('options = [" a"]', "options_not_allowed", "options"),
])
def test_validate_checks_extraction_questions(tmp_path, line, code, key):
    body = HEADER + f'\n[[questions]]\nid = "month"\ntemplate = "Month: <*>"\n{line}\n'
    write(tmp_path, body)
    (error,) = validate_packs(tmp_path)
    assert error.code == code and error.loc.line == 10 and key in error.message


def test_validate_refuses_beam_width_on_gen(tmp_path):
    write(tmp_path, HEADER + '\n[[questions]]\nid = "say"\ntemplate = "Say: <gen>"\nbeam_width = 2\n')
    (error,) = validate_packs(tmp_path)
    assert error.code == "not_allowed" and "beam_width" in error.message
