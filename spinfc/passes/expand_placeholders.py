"""expand-placeholders: one `Question` per combination of a query's placeholder values (a grid)."""

from __future__ import annotations

import itertools

import attrs

from spinfc.errors import CompileError
from spinfc.ir.nodes import SEARCHED_SLOTS, OptionSlot, Placeholder, Program, Query, Question, SlotRef, Text
from spinfc.passes.context import recalled, remember

# The most questions one program may expand to. A grid grows as the product of its value lists, so a few hundred
# bytes of placeholders can ask for millions of questions; the server's `max_prompts_per_input` (default 10,000)
# refuses such a request before this pass runs, and this cap protects every other caller (`spinfc compile`).
MAX_QUESTIONS = 1_000_000


def grid_size(query: Query) -> int:
    """How many questions `query` expands to: the product of its placeholders' value counts (1 without any)."""
    used = set(query.template.placeholders)
    size = 1
    for name, values in query.placeholders:
        if name in used:
            size *= len(values)
    return size


def expand_placeholders(program: Program, memo: dict | None = None) -> Program:
    """Fill `program.questions`, replacing any there were (from `memo` when the same queries were expanded before:
    the questions are a function of the queries alone, frozen values compared by value, and a server sees the same
    queries request after request).

    Guarantees: the questions come in query order, and within a query in grid order over the placeholders in the
    order of `query.placeholders` (the first varies slowest, the last fastest; values in their given order);
    `Question.values` names every placeholder of the template once, in that order (values given for a name the
    template does not use are ignored). `Question.prompt` is the template text before the slot
    with the values filled in. For extraction slots (text, number, amount, generate) the text after the slot,
    filled in the same way, becomes the slot's `stop`; an option slot ignores the text after it. The spaces that
    end the prompt of a searched slot (<*> <n> <$>) become the slot's `lead`, the start of every answer: the model
    writes ` $30` as one token after `A:`, and after a lone space token almost never writes `$` (token healing).
    Raises `CompileError` for a template without a slot, a placeholder without values, or more than
    `MAX_QUESTIONS` questions in all (counted before any is built).
    """
    key = ("questions of", program.queries)
    questions = recalled(memo, key)
    if questions is not None:
        return attrs.evolve(program, questions=questions)
    total = sum(grid_size(query) for query in program.queries)
    if total > MAX_QUESTIONS:
        largest = max(program.queries, key=grid_size)
        raise CompileError(
            f"the placeholder grids expand to {total:,} questions, more than {MAX_QUESTIONS:,}; query "
            f"{largest.id!r} alone makes {grid_size(largest):,}", largest.template.loc, code="grid_too_large",
            hint="give fewer placeholder values, or split the grid across requests",
        )
    questions = tuple(question for query in program.queries for question in _expand(query))
    remember(memo, key, questions)
    return attrs.evolve(program, questions=questions)


def _expand(query: Query) -> list[Question]:
    template = query.template
    if template.slot is None:
        raise CompileError(
            f"query {query.id!r} has no slot", template.loc, code="no_slot",
            hint="end the template with a slot, e.g. <?> with options, or <*> for a short text answer",
        )
    given = dict(query.placeholders)
    used = set(template.placeholders)
    names = tuple(name for name, _ in query.placeholders if name in used)
    for part in template.parts:
        if isinstance(part, Placeholder) and not given.get(part.name):
            raise CompileError(
                f"placeholder {{{part.name}}} of query {query.id!r} has no values", part.loc,
                code="placeholder_without_values", hint=f"give the values of {part.name} with the query",
            )
    questions = []
    for combination in itertools.product(*(given[name] for name in names)):
        values = tuple(zip(names, combination))
        before, after = _fill(template.parts, dict(values))
        slot = query.slot
        if not isinstance(slot, OptionSlot) and after:
            slot = attrs.evolve(slot, stop=after)
        if isinstance(slot, SEARCHED_SLOTS) and before.strip(" "):
            kept = before.rstrip(" ")
            before, slot = kept, attrs.evolve(slot, lead=before[len(kept):])
        questions.append(Question(query_id=query.id, values=values, prompt=before, slot=slot))
    return questions


def _fill(parts, values: dict[str, str]) -> tuple[str, str]:
    """The template text before and after its slot, with placeholder values filled in."""
    pieces: list[list[str]] = [[], []]
    side = 0
    for part in parts:
        if isinstance(part, SlotRef):
            side = 1
        elif isinstance(part, Text):
            pieces[side].append(part.text)
        elif isinstance(part, Placeholder):
            pieces[side].append(values[part.name])
    return "".join(pieces[0]), "".join(pieces[1])
