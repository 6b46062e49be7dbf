"""Read a pack file into a `Pack`, collecting every error of the file (each with file, line and column).

The TOML is parsed by `tomllib`; positions come from `TomlPositions`, so an error points at the key or value
(and inside a template, at the character) it is about. Reading goes on after an error, one question, category
or rule at a time, so `spinfc packs validate` can list every mistake of a file in one run.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path

from spinfc.errors import CompileError, PackError
from spinfc.frontend.fields import Fields, TomlWhere, collect
from spinfc.frontend.pack import BASELINES, COMBINERS, Category, Condition, Decision, Member, Pack, Rule
from spinfc.frontend.query import read_query
from spinfc.frontend.tomlpos import TomlPositions
from spinfc.ir.nodes import OptionSlot, Placeholder, Query, SourceLoc, Text

PACK_KEYS = ("id", "version", "description", "models", "presentation", "questions", "categories", "decision")
PACK_ID = r"[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*"
VERSION = r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?"
NAME = r"[a-z][a-z0-9_]*"
LABEL = r"[A-Za-z0-9_][A-Za-z0-9_.:-]*"
CONDITION = re.compile(r"\s*([a-z][a-z0-9_]*)\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)\s*")


def read_pack(path: Path) -> tuple[Pack | None, list[CompileError]]:
    """The pack at `path` and no errors, or None and every error found in the file."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        return None, [PackError(f"cannot read the pack file: {reason}", SourceLoc(file), code="unreadable",
                                hint="give the path of a UTF-8 .toml file")]  # fmt: skip
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return None, [_toml_error(error, file)]
    f = Fields(data, (), TomlWhere(TomlPositions(text, file)), PackError)
    errors: list[CompileError] = []
    header = collect(errors, lambda: _header(f))
    queries = _questions(f, errors)
    categories = _categories(f, queries, errors)
    decision = collect(errors, lambda: _decision(f, {c.id for c in categories}))
    if errors or header is None:
        return None, errors
    return Pack(**header, queries=tuple(q for q in queries.values() if q), categories=categories,
                decision=decision, path=path), []  # fmt: skip


def _toml_error(error: tomllib.TOMLDecodeError, file: str) -> PackError:
    message = str(error)
    found = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message) or re.search(r"\s*\(at end of document\)$", message)
    loc = SourceLoc(file, int(found[1]), int(found[2])) if found and found.lastindex else SourceLoc(file)
    message = message[: found.start()] if found else message
    return PackError(f"not valid TOML: {message}", loc, code="toml_syntax",
                     hint='quote every string ("..." or \'...\'), one key = value per line, [[questions]] before '
                          "each question; see docs/packs.md")  # fmt: skip


def _header(f: Fields) -> dict:
    f.check_keys(PACK_KEYS)
    header = {
        "id": f.string("id", "pack id (namespace/name)", '"acme/support-triage"', pattern=PACK_ID),
        "version": f.string("version", "version", '"1.0.0"', pattern=VERSION),
        "description": f.string("description", "description", '"What the pack is for, in one sentence."'),
        "models": f.strings("models", "model", '["gemma3-270m", "smollm2-135m"]'),
    }
    return header | _presentation(f)


def _presentation(f: Fields) -> dict:
    if not f.has("presentation"):
        return {"presentation_before": "", "presentation_after": ""}
    template = f.template("presentation", "presentation", '"Customer message:\\n{content}"', slots_allowed=0)
    holes = [p for p in template.parts if isinstance(p, Placeholder)]
    for hole in holes:
        if hole.name != "content":
            raise PackError(f"the presentation has no placeholder {{{hole.name}}}; it knows only {{content}}",
                            hole.loc, code="unknown_placeholder", param="presentation",
                            hint="write {content} where the content goes; \\{ for a literal {")  # fmt: skip
    if len(holes) != 1:
        raise PackError(f"the presentation must hold {{content}} exactly once, not {len(holes)} times",
                        holes[1].loc if holes else f.loc("presentation"), param="presentation",
                        code="missing_content" if not holes else "duplicate_content",
                        hint='write it once where the content goes: presentation = "Customer message:\\n{content}"')  # fmt: skip
    at = template.parts.index(holes[0])
    text = lambda parts: "".join(p.text for p in parts if isinstance(p, Text))  # noqa: E731
    return {"presentation_before": text(template.parts[:at]), "presentation_after": text(template.parts[at + 1 :])}


def _questions(f: Fields, errors: list[CompileError]) -> dict[str, Query | None]:
    """Question id -> query; None for a question whose id is known but which has an error (not reported twice)."""
    tables = collect(errors, lambda: f.tables("questions", "question", "[[questions]]"))
    if tables == []:
        collect(errors, lambda: f.fail(None, "the pack has no questions", code="no_questions",
                                       hint="add one: [[questions]] with id, template and options"))  # fmt: skip
    queries: dict[str, Query | None] = {}
    for q in tables or []:
        query = collect(errors, lambda: read_query(q))
        query_id = query.id if query else q.data.get("id")
        if isinstance(query_id, str) and query_id in queries:
            collect(errors, lambda: q.fail("id", f"question id {query_id!r} is used twice", code="duplicate_id",
                                           hint="give each question its own id"))  # fmt: skip
        elif isinstance(query_id, str):
            queries[query_id] = query
    return queries


def _categories(f: Fields, queries: dict[str, Query | None], errors: list[CompileError]) -> tuple[Category, ...]:
    tables = collect(errors, lambda: f.tables("categories", "category", "[[categories]]")) or []
    categories: dict[str, Category] = {}
    for c in tables:
        category = collect(errors, lambda: _category(c, queries))
        if category is not None and category.id in categories:
            collect(errors, lambda: c.fail("id", f"category id {category.id!r} is used twice", code="duplicate_id",
                                           hint="give each category its own id"))  # fmt: skip
        elif category is not None:
            categories[category.id] = category
    return tuple(categories.values())


def _category(c: Fields, queries: dict[str, Query | None]) -> Category:
    c.check_keys(("id", "description", "combine", "baseline", "members"))
    category_id = c.string("id", "category id", '"harassment"', pattern=NAME)
    description = c.string("description", "description", '"..."', default="")
    combine = c.string("combine", "combiner", '"noisy_or"')
    if combine not in COMBINERS:
        c.fail("combine", f"unknown combiner {combine!r}", code="bad_value", hint=f"use one of: {', '.join(COMBINERS)}")
    baseline = c.string("baseline", "baseline", '"floor"', default="none")
    if baseline not in BASELINES:
        c.fail("baseline", f"unknown baseline {baseline!r}", code="bad_value",
               hint='use "none" (members count p) or "floor" (members count their lift over floor_p)')  # fmt: skip
    members = c.tables("members", "member", '[{ question = "threat", option = " yes" }]')
    if not members:
        c.fail(None, f"category {category_id!r} has no members", code="no_members",
               hint='list the answers it counts: members = [{ question = "threat", option = " yes" }]')  # fmt: skip
    return Category(category_id, combine, tuple(_member(m, combine, queries) for m in members), description, baseline)


def _member(m: Fields, combine: str, queries: dict[str, Query | None]) -> Member:
    m.check_keys(("question", "option", "weight", "values"))
    name = m.string("question", "question id", '"threat"')
    option = m.string("option", "option", '" yes"')
    weight = m.number("weight", "weight", "0.5", default=1.0)
    low, high = {"noisy_or": (0.0, 1.0), "weighted_sum": (float("-inf"), float("inf"))}.get(combine, (0.0, float("inf")))
    if not (low < weight <= high) or weight == 0:
        span = {"noisy_or": "in (0, 1]", "weighted_sum": "non-zero"}.get(combine, "greater than 0")
        m.fail("weight", f"weight {weight:g} is out of range for {combine}", code="bad_value",
               hint=f"a {combine} weight is {span} (docs/packs.md, Combiners)")  # fmt: skip
    if name not in queries:
        close = difflib.get_close_matches(name, list(queries), n=1)
        m.fail("question", f"no question has id {name!r}", code="unknown_question",
               hint=f"did you mean {close[0]!r}?" if close else "name a question of this pack by its id")  # fmt: skip
    values = _member_values(m)
    query = queries[name]
    if query is None:  # the question itself has an error, reported on its own
        return Member(name, option, weight, values)
    if not isinstance(query.slot, OptionSlot):
        m.fail("question", f"question {name!r} extracts text; a category counts option probabilities",
               code="not_option_question", hint="name a question with an option slot <?>")  # fmt: skip
    texts = [o.text for o in query.slot.options]
    if option not in texts:
        m.fail("option", f"question {name!r} has no option {option!r}", code="unknown_option",
               hint=f"its options are {', '.join(map(repr, texts))} (the leading space is part of an option)")  # fmt: skip
    grid = dict(query.placeholders)
    for key, value in values:
        if key not in grid:
            m.fail(("values", key), f"question {name!r} has no placeholder {{{key}}}", code="unknown_placeholder",
                   at_key=True, hint=f"its placeholders are: {', '.join(grid) or 'none'}")  # fmt: skip
        if value not in grid[key]:
            m.fail(("values", key), f"{value!r} is not a value of {{{key}}}", code="unknown_value",
                   hint=f"its values are {', '.join(map(repr, grid[key]))}")  # fmt: skip
    return Member(name, option, weight, values)


def _member_values(m: Fields) -> tuple[tuple[str, str], ...]:
    table = m.table("values", "placeholder values", '{ target = "religion" }', default=None)
    if table is None:
        return ()
    return tuple((key, table.string(key, "placeholder value", '"religion"')) for key in table.data)


def _decision(f: Fields, categories: set[str]) -> Decision | None:
    d = f.table("decision", "decision", '{ default = "allow" }', default=None)
    if d is None:
        return None
    d.check_keys(("default", "rules"))
    default = d.string("default", "label", '"allow"', pattern=LABEL)
    return Decision(tuple(_rule(r, categories) for r in d.tables("rules", "rule", "[[decision.rules]]")), default)


def _rule(r: Fields, categories: set[str]) -> Rule:
    r.check_keys(("label", "any", "all"))
    label = r.string("label", "label", '"block"', pattern=LABEL)
    if r.has("any") == r.has("all"):
        r.fail(None, "a rule has either `any` or `all` (a list of conditions), not " + ("both" if r.has("any") else "neither"),
               code="bad_rule", hint='write e.g. any = ["violence >= 0.8", "hate >= 0.8"]')  # fmt: skip
    match = "any" if r.has("any") else "all"
    conditions = []
    for index, text in enumerate(r.strings(match, "condition", '["violence >= 0.8"]')):
        found = CONDITION.fullmatch(text)
        if not found:
            r.fail((match, index), f"condition {text!r} is not `category op number`", code="bad_condition",
                   hint='write a category, one of >= > <= <, and a number: "violence >= 0.8"')  # fmt: skip
        if found[1] not in categories:
            close = difflib.get_close_matches(found[1], sorted(categories), n=1)
            r.fail((match, index), f"no category has id {found[1]!r}", code="unknown_category",
                   hint=f"did you mean {close[0]!r}?" if close else "name a category of this pack by its id")  # fmt: skip
        conditions.append(Condition(found[1], found[2], float(found[3])))
    return Rule(label, match, tuple(conditions))

