"""Bounds on a pack's TOML: how deeply it nests, found before `tomllib` reads it (`tomllib` recurses once per
level, so a file of 100,000 `[` would end in a RecursionError instead of a located error), and how long a string
may be (a template of a megabyte costs seconds to parse and locate, and no server asks a question that long).

`nesting_problem(text, file)` walks the text once, skipping strings and comments, and counts the open arrays and
inline tables plus the dots of a dotted key (`a.b.c = 1` nests like `a = {b = {c = 1}}`). A pack needs three
levels (`members = [{ values = { ... } }]`); anything past `MAX_TOML_DEPTH` is refused where it passes the limit.
Text that is not valid TOML is left to `tomllib`, which reports it.
"""

from __future__ import annotations

import re

from spinfc.errors import PackError
from spinfc.ir.nodes import SourceLoc

MAX_TOML_DEPTH = 32
MAX_PACK_STRING_CHARS = 50_000  # a template, an option, a presentation: the default max_query_tokens is 256
_MARKS = re.compile(r"[\"'#\[\]{}.=,\n]")


def nesting_problem(text: str, file: str) -> PackError | None:
    """A `toml_too_deep` error at the first place `text` nests past `MAX_TOML_DEPTH` levels, or None."""
    depth = dots = 0
    i = 0
    while (mark := _MARKS.search(text, i)) is not None:
        i, c = mark.start(), mark[0]
        if c in "\"'":
            i = _string_end(text, i, c)
            if i < 0:
                return None  # an unclosed string: tomllib says where
            continue
        if c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if c == ".":
            dots += 1
        else:
            dots = 0
            depth += 1 if c in "[{" else -1 if c in "]}" and depth > 0 else 0
        if depth + dots > MAX_TOML_DEPTH:
            line = text.count("\n", 0, i) + 1
            return PackError(
                f"the TOML nests more than {MAX_TOML_DEPTH} levels deep (arrays, inline tables and dotted keys)",
                SourceLoc(file, line, i - (text.rfind("\n", 0, i) + 1) + 1), code="toml_too_deep",
                hint="a pack needs three levels at most (members = [{ values = { ... } }]); flatten this value")
        i += 1
    return None


def _string_end(text: str, start: int, quote: str) -> int:
    """The offset just past the string opening at `start`, or -1 when it is never closed."""
    triple = text.startswith(quote * 3, start)
    closing = quote * 3 if triple else quote
    i = start + len(closing)
    while True:
        end = text.find(closing, i)
        newline = -1 if triple else text.find("\n", i)
        if end < 0 or 0 <= newline < end:
            return -1
        if quote == '"' and _escaped(text, end):  # \" inside a basic string
            i = end + 1
            continue
        end += len(closing)
        if triple:  # up to two quotes just before the closing three belong to the string
            for _ in range(2):
                if end < len(text) and text[end] == quote:
                    end += 1
        return end


def _escaped(text: str, at: int) -> bool:
    backslashes = 0
    while at - backslashes - 1 >= 0 and text[at - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def long_string(data, path: tuple = ()) -> tuple[tuple, int] | None:
    """The key path and length of the first string in `data` (parsed TOML, nesting already bounded) longer than
    `MAX_PACK_STRING_CHARS`, or None."""
    if isinstance(data, str):
        return (path, len(data)) if len(data) > MAX_PACK_STRING_CHARS else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = long_string(value, path + (key,))
        if found is not None:
            return found
    return None
