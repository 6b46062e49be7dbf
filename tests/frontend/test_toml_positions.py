"""TomlPositions: every key path of a TOML file maps to the line and column of its value, strings to each character."""

import tomllib

from spinfc.frontend.tomlpos import TomlPositions

TEXT = '''# a comment
id = "acme/x"   # trailing comment
"quoted key" = 'lit'
nested.key = 3

[[questions]]
id = "a"
template = "\\n\\nIs \\"it\\" about {topic}?\\nAnswer:<?>"
options = [" yes",
           " no"]

[[questions]]
id = "b"
template = """
first line
Answer:<?>"""
placeholders = { topic = ["x", 'y'], other = { deep = "z" } }

[decision]
default = "allow"

[[decision.rules]]
label = "block"
any = ["v >= 0.5"]

[[decision.rules]]
label = "review"
all = ["v >= 0.1", "w < 2"]
'''


def place(positions, path, key=False):
    loc = positions.loc(path, key=key)
    return loc.line, loc.column


def test_values_and_keys():
    positions = TomlPositions(TEXT, "f.toml")
    assert place(positions, ("id",)) == (2, 6)
    assert place(positions, ("quoted key",)) == (3, 16)
    assert place(positions, ("nested", "key")) == (4, 14)
    assert place(positions, ("questions", 0, "options"), key=True) == (9, 1)
    assert place(positions, ("questions", 0, "options", 1)) == (10, 12)
    assert place(positions, ("questions", 1, "id")) == (13, 6)
    assert place(positions, ("questions", 1, "placeholders", "topic", 1)) == (17, 32)
    assert place(positions, ("questions", 1, "placeholders", "other", "deep")) == (17, 55)
    assert place(positions, ("decision", "default")) == (20, 11)
    assert place(positions, ("decision", "rules", 1, "all", 1)) == (28, 20)


def test_unknown_path_falls_back_to_the_nearest_ancestor():
    positions = TomlPositions(TEXT, "f.toml")
    assert place(positions, ("questions", 1, "no_such_key")) == (12, 1)  # the [[questions]] header


def test_string_characters_map_through_escapes_and_multiline_strings():
    data = tomllib.loads(TEXT)
    positions = TomlPositions(TEXT, "f.toml")
    template = data["questions"][0]["template"]
    locate = positions.string_locator(("questions", 0, "template"), template)
    brace = template.index("{topic}")
    assert (locate(brace).line, locate(brace).column) == (8, 33)
    assert TEXT.splitlines()[7][32:39] == "{topic}"
    multi = data["questions"][1]["template"]
    locate = positions.string_locator(("questions", 1, "template"), multi)
    slot = multi.index("<?>")
    assert (locate(slot).line, locate(slot).column) == (16, 8)


def test_every_string_decodes_like_tomllib():
    positions = TomlPositions(TEXT, "f.toml")
    data = tomllib.loads(TEXT)
    for path, spot in positions.spots.items():
        if spot.decoded is None:
            continue
        value = data
        for key in path:
            value = value[key]
        assert spot.decoded == value, path
        assert len(spot.chars) == len(value) + 1


def test_multiline_quotes_and_line_ending_backslash():
    text = 'a = """x\\\n    y""""\nb = \'\'\'q\'\'\'\'\'\nc = "\\u00e9\\U0001F600!"\n'
    data = tomllib.loads(text)
    positions = TomlPositions(text, "g.toml")
    for key in "abc":
        assert positions.spots[(key,)].decoded == data[key]
