"""Read a pack's `[[categories]]` and `[decision]` (format: docs/packs.md, Categories and Decision).

Every member must name a question, an option and placeholder values that exist, with a weight in its combiner's
range; every condition must name a category. Errors are located like all pack errors (file, line, column).
"""

from __future__ import annotations

import difflib
import re

from spinfc.errors import CompileError
from spinfc.frontend.fields import Fields, collect
from spinfc.frontend.pack import BASELINES, COMBINERS, Category, Condition, Decision, Member, Rule
from spinfc.ir.nodes import OptionSlot, Query

NAME = r"[a-z][a-z0-9_]*"
LABEL = r"[A-Za-z0-9_][A-Za-z0-9_.:-]*"
CONDITION = re.compile(r"\s*([a-z][a-z0-9_]*)\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?|calibrated)\s*")
WEIGHTS = {  # combiner -> (is this weight allowed, the range in words)
    "max": (lambda w: w > 0, "greater than 0"),
    "mean": (lambda w: w > 0, "greater than 0"),
    "weighted_sum": (lambda w: w != 0, "non-zero"),
    "noisy_or": (lambda w: 0 < w <= 1, "in (0, 1]"),
}


def read_categories(f: Fields, queries: dict[str, Query | None], errors: list[CompileError]) -> tuple[Category, ...]:
    """The pack's categories; each broken one adds its error to `errors` and is left out."""
    tables = collect(errors, f.tables, "categories", "category", "[[categories]]") or []
    categories: dict[str, Category] = {}
    for c in tables:
        category = collect(errors, _category, c, queries)
        if category is not None and category.id in categories:
            errors.append(
                c.problem(
                    "id",
                    f"category id {category.id!r} is used twice",
                    code="duplicate_id",
                    hint="give each category its own id",
                )
            )
        elif category is not None:
            categories[category.id] = category
    return tuple(categories.values())


def _category(c: Fields, queries: dict[str, Query | None]) -> Category:
    c.check_keys(("id", "description", "combine", "baseline", "members"))
    category_id = c.string("id", "category id", '"harassment"', pattern=NAME)
    description = c.string("description", "description", '"..."', default="")
    combine = c.string("combine", "combiner", '"noisy_or"')
    if combine not in COMBINERS:
        c.fail("combine", f"unknown combiner {combine!r}", code="invalid_value",
               hint=f"use one of: {', '.join(COMBINERS)}")
    baseline = c.string("baseline", "baseline", '"floor"', default="none")
    if baseline not in BASELINES:
        c.fail(
            "baseline",
            f"unknown baseline {baseline!r}",
            code="invalid_value",
            hint='use "none" (members count p) or "floor" (members count their lift over floor_p)',
        )
    members = c.tables("members", "member", '[{ question = "threat", option = " yes" }]')
    if not members:
        c.fail(
            None,
            f"category {category_id!r} has no members",
            code="no_members",
            hint='list the answers it counts: members = [{ question = "threat", option = " yes" }]',
        )
    return Category(category_id, combine, tuple(_member(m, combine, queries) for m in members), description, baseline)


def _member(m: Fields, combine: str, queries: dict[str, Query | None]) -> Member:
    m.check_keys(("question", "option", "weight", "values"))
    name = m.string("question", "question id", '"threat"')
    option = m.string("option", "option", '" yes"')
    weight = m.number("weight", "weight", "0.5", default=1.0)
    allowed, span = WEIGHTS.get(combine, WEIGHTS["max"])
    if not allowed(weight):
        m.fail(
            "weight",
            f"weight {weight:g} is out of range for {combine}",
            code="invalid_value",
            hint=f"a {combine} weight is {span} (docs/packs.md, Combiners)",
        )
    if name not in queries:
        close = difflib.get_close_matches(name, list(queries), n=1)
        m.fail(
            "question",
            f"no question has id {name!r}",
            code="unknown_question",
            hint=f"did you mean {close[0]!r}?" if close else "name a question of this pack by its id",
        )
    values = _member_values(m)
    query = queries[name]
    if query is None:  # the question itself has an error, reported on its own
        return Member(name, option, weight, values)
    if not isinstance(query.slot, OptionSlot):
        m.fail(
            "question",
            f"question {name!r} extracts text; a category counts option probabilities",
            code="not_option_question",
            hint="name a question with an option slot <?>",
        )
    texts = [o.text for o in query.slot.options]
    every_code = query.slot.codes and not texts  # codes = "all": the model's codes, known once it is loaded
    if option not in texts and not every_code:
        m.fail(
            "option",
            f"question {name!r} has no option {option!r}",
            code="unknown_option",
            hint=f"its options are {', '.join(map(repr, texts))} (the leading space is part of an option)",
        )
    grid = dict(query.placeholders)
    for key, value in values:
        if key not in grid:
            m.fail(
                ("values", key),
                f"question {name!r} has no placeholder {{{key}}}",
                code="unknown_placeholder",
                at_key=True,
                hint=f"its placeholders are: {', '.join(grid) or 'none'}",
            )
        if value not in grid[key]:
            m.fail(
                ("values", key),
                f"{value!r} is not a value of {{{key}}}",
                code="unknown_value",
                hint=f"its values are {', '.join(map(repr, grid[key]))}",
            )
    return Member(name, option, weight, values)


def _member_values(m: Fields) -> tuple[tuple[str, str], ...]:
    table = m.table("values", "placeholder values", '{ target = "religion" }', default=None)
    if table is None:
        return ()
    return tuple((key, table.string(key, "placeholder value", '"religion"')) for key in table.data)


def read_decision(f: Fields, categories: set[str], calibration=None) -> Decision | None:
    """The decision; a condition's number may be `calibrated`: the category's threshold in `calibration`."""
    d = f.table("decision", "decision", '{ default = "allow" }', default=None)
    if d is None:
        return None
    d.check_keys(("default", "rules"))
    default = d.string("default", "label", '"allow"', pattern=LABEL)
    rules = tuple(_rule(r, categories, calibration) for r in d.tables("rules", "rule", "[[decision.rules]]"))
    return Decision(rules, default)


def _rule(r: Fields, categories: set[str], calibration) -> Rule:
    r.check_keys(("label", "any", "all"))
    label = r.string("label", "label", '"block"', pattern=LABEL)
    if r.has("any") == r.has("all"):
        r.fail(
            None,
            "a rule has either `any` or `all` (a list of conditions), not " + ("both" if r.has("any") else "neither"),
            code="bad_rule",
            hint='write e.g. any = ["violence >= 0.8", "hate >= 0.8"]',
        )
    match = "any" if r.has("any") else "all"
    conditions = []
    for index, text in enumerate(r.strings(match, "condition", '["violence >= 0.8"]')):
        found = CONDITION.fullmatch(text)
        if not found:
            r.fail(
                (match, index),
                f"condition {text!r} is not `category op number`",
                code="bad_condition",
                hint='write a category, one of >= > <= <, and a number (or `calibrated`): "violence >= 0.8"',
            )
        if found[1] not in categories:
            close = difflib.get_close_matches(found[1], sorted(categories), n=1)
            r.fail(
                (match, index),
                f"no category has id {found[1]!r}",
                code="unknown_category",
                hint=f"did you mean {close[0]!r}?" if close else "name a category of this pack by its id",
            )
        threshold = found[3]
        if threshold == "calibrated":
            chosen = calibration.category(found[1]) if calibration is not None else None
            if chosen is None:
                r.fail((match, index), f"condition {text!r} needs a calibrated threshold for {found[1]!r}, and the "
                       "pack's [calibration] has none", code="uncalibrated",
                       hint=f"run spinfc calibrate with a label column {found[1]!r}, or write a number")
            threshold = chosen.threshold
        conditions.append(Condition(found[1], found[2], float(threshold)))
    return Rule(label, match, tuple(conditions))
