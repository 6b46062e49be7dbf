"""A /v1/decisions question set -> compiled rounds, and the rounds scored (`score_rounds`): the runtime's side of
/v1/decisions, as runtime/scoring.py is /v1/score's; the server's route keeps the HTTP.

The rounds: each round is one read of the state with a group of questions as
its branches, small enough for one pass; a large set becomes several rounds, never a rejection.

All questions go into one round when the state and their question tree fit a pass (`--token-budget`). When they do
not, the set is halved, and each half again, until every group fits; the rounds run together in the engine's
shared passes (each reads the state once more). A single question that does not fit a pass with the state runs
alone in a longer pass where passes are trimmed (the CPU: `Shapes.largest`, e.g. a choice of 255 options at the
default budget); only one that does not fit that either is refused (400 content_too_long, naming the question).

Limits, for decision questions: the assembled template of a choice or score lists every option or level, so
`max_query_tokens` does not apply to it; it applies instead to each piece the client wrote (the instructions, the
noul criteria, each option's key and description, each level's description). `max_prompts_per_input` counts the
questions; `max_processed_tokens` counts every round's tokens together; `max_options` / `max_option_tokens` count
the labels the template asks for (one per option or level, a token or two each).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from spinfc.config import Limits
from spinfc.errors import ContentTooLong, RequestError
from spinfc.ir.nodes import Program
from spinfc.passes.tokenize import encode_text
from spinfc.runtime.decisions.validate import _path
from spinfc.runtime.engine import Compiled, Engine
from spinfc.runtime.limits import check_limits, processed_tokens


def question_param(question_id: str) -> str:
    return _path("questions", question_id)


def written_pieces(question_id: str, question: Mapping) -> list[tuple[str, str]]:
    """(JSON path, text) of every piece of a question the client wrote."""
    at = question_param(question_id)
    pieces = [(_path(at, "instructions"), question["instructions"])]
    criteria = question.get("criteria")
    if isinstance(criteria, str):
        pieces.append((_path(at, "criteria"), criteria))
    elif isinstance(criteria, Mapping):
        pieces += [(_path(_path(at, "criteria"), key), f"{key}: {text}") for key, text in criteria.items()]
    elif isinstance(criteria, list):
        pieces += [(_path(_path(at, "criteria"), i), text) for i, text in enumerate(criteria)]
    return pieces


def round_check(body: Mapping, limits: Limits, content_field: str, tokenizer) -> Callable[[Program], None]:
    """The limits check of one round's program (runs on the engine's compile thread, where the tokenizer is)."""
    def check(program: Program) -> None:
        where = {query.id: question_param(query.id) for query in program.queries}
        check_limits(program, limits, many_inputs=False, where=where, options_field="criteria",
                     skip=("max_query_tokens", "max_prompts_per_input"), content_field=content_field)
        for query in program.queries:
            for param, text in written_pieces(query.id, body["questions"][query.id]):
                tokens = len(encode_text(tokenizer, text))  # counted as it is encoded: as plain text
                if tokens > limits.max_query_tokens:
                    raise RequestError(
                        f"{param}: {tokens:,} tokens in one piece of a question, over the server's limit of "
                        f"{limits.max_query_tokens:,} (max_query_tokens)", code="max_query_tokens_exceeded",
                        param=param, hint="shorten it, or start the server with a higher --max-query-tokens "
                        "(SPINFC_MAX_QUERY_TOKENS, [limits] max_query_tokens)")
    return check


async def compile_rounds(engine: Engine, body: Mapping, messages: list[dict], queries: list[dict],
                         limits: Limits, check_total: bool = True) -> list[Compiled]:
    """The rounds that answer `queries` (from `decision_queries`) about `messages`, checked against `limits`
    (`max_processed_tokens` over the rounds unless not `check_total`: the caller counts several contents' together)."""
    content_field = "messages" if body.get("messages") is not None else "state"
    check = round_check(body, limits, content_field, engine.tokenizer)

    async def compile_group(group: list[dict]) -> list[Compiled]:
        request = {"messages": messages, "scoring": {"queries": group}}
        try:
            compiled = await engine.compile_async(request, check=check)
            if len(group) > 1 and any(s.length > engine.shapes.budget for s in compiled.segments):
                raise ContentTooLong("the round does not fit a pass of the budget")  # halve it
            return [compiled]
        except ContentTooLong as error:  # the pass planner or the engine: too long for one pass
            if len(group) == 1:
                raise ContentTooLong(f"question {group[0]['id']!r} with the {content_field} does not fit one pass "
                                     f"({error.message}): shorten the {content_field} or the question's criteria, "
                                     "or start the server with a higher --token-budget",
                                     param=question_param(group[0]["id"])) from None
            half = len(group) // 2
            return await compile_group(group[:half]) + await compile_group(group[half:])

    rounds = await compile_group(queries)
    if check_total:
        check_processed(limits, rounds)
    return rounds


def check_processed(limits: Limits, rounds: list[Compiled]) -> None:
    """`max_processed_tokens` over every round of a request."""
    limits.check("max_processed_tokens", sum(processed_tokens(c.program) for c in rounds))


async def score_rounds(engine: Engine, rounds: list[Compiled]) -> list:
    """Score every round; when one fails the others are withdrawn (not left running in the engine after the
    request has given back its admission place), and the first error is raised as it is."""
    tasks = [asyncio.ensure_future(engine.score(compiled)) for compiled in rounds]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
