"""A /v1/decisions question set -> compiled rounds, and the rounds scored: the runtime's side of /v1/decisions; the
server's route keeps the HTTP.

    check_decisions   the request before anything is tokenized, against its policy (runtime/admit/policy.py)
    compile_rounds    the rounds that answer its questions, each checked by `Policy.check_round`, all of them
                      together by `Policy.check_processed`

and the rounds are scored through the one scoring entry's form for work checked and compiled already
(runtime/admit/scoring.py `score_compiled`).

The rounds: each round is one read of the state with a group of questions as its branches, small enough for one
pass; a large set becomes several rounds, never a rejection.

All questions go into one round when the state and their question tree fit a pass (`--token-budget`). When they do
not, the set is halved, and each half again, until every group fits; the rounds run together in the engine's
shared passes (each reads the state once more). A single question that does not fit a pass with the state runs
alone in a longer pass where passes are trimmed (the CPU: `Shapes.largest`, e.g. a choice of 255 options at the
default budget); only one that does not fit that either is refused (400 content_too_long, naming the question).

Every limit is the policy's (runtime/admit/policy.py), as for /v1/score; for decision questions: the assembled template
of a choice or score lists every option or level, so `max_query_tokens` does not apply to it; it applies instead
to each piece the client wrote (the instructions, the noul criteria, each option's key and description, each
level's description). `max_prompts_per_input` counts the
questions; `max_processed_tokens` counts every round's tokens together; `max_options` / `max_option_tokens` count
the labels the template asks for (one per option or level, a token or two each).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from spinfc.errors import ContentTooLong
from spinfc.ir.nodes import Program
from spinfc.passes.tokenize import encode_text
from spinfc.runtime.admit.compiled import Compiled
from spinfc.runtime.admit.policy import Policy
from spinfc.runtime.decisions import decision_messages
from spinfc.runtime.decisions.validate import _path


def question_param(question_id: str) -> str:
    return _path("questions", question_id)


def content_field(body: Mapping) -> str:
    """Where a body (or an input of one) holds what is read: `messages`, or `state`."""
    return "messages" if body.get("messages") is not None else "state"


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


def check_decisions(policy: Policy, body: Mapping, queries: Sequence[dict]) -> None:
    """A validated /v1/decisions body (its `queries` from `decision_queries`) before anything is tokenized: the
    questions counted, then the sizes of what is read (the `state`, the `messages`, each input's) and of every piece
    of a question the client wrote (with `inputs`: the pieces first, as every input shares them)."""
    policy.check_questions(len(queries))
    pieces = [piece for qid, question in body["questions"].items() for piece in written_pieces(qid, question)]
    if body.get("inputs") is None:
        policy.prechecks.messages(decision_messages(body), content_field(body))
        policy.prechecks.pieces(pieces)
        return
    policy.prechecks.pieces(pieces)
    for i, item in enumerate(body["inputs"]):
        policy.prechecks.messages(decision_messages(item), f"inputs[{i}].{content_field(item)}")


def round_check(body: Mapping, policy: Policy, tokenizer):
    """The check of one round's compiled program (on the engine's compile thread, where the tokenizer is)."""
    field = content_field(body)

    def pieces(program: Program) -> Iterator[tuple[str, int]]:  # counted as they are encoded: as plain text
        for query in program.queries:
            for param, text in written_pieces(query.id, body["questions"][query.id]):
                yield param, len(encode_text(tokenizer, text))

    def check(program: Program) -> None:
        where = {query.id: question_param(query.id) for query in program.queries}
        policy.check_round(program, where, field, pieces(program))
    return check


async def compile_rounds(engine, body: Mapping, queries: list[dict], policy: Policy,
                         check_total: bool = True) -> list[Compiled]:
    """The rounds that answer `queries` (from `decision_queries`) about the body's content, checked against `policy`
    (`max_processed_tokens` over the rounds unless not `check_total`: the caller counts several contents' together)."""
    field = content_field(body)
    messages = decision_messages(body)
    check = round_check(body, policy, engine.tokenizer)

    async def compile_group(group: list[dict]) -> list[Compiled]:
        request = {"messages": messages, "scoring": {"queries": group}}
        try:
            compiled = await engine.compile_async(request, check=check)
            if len(group) > 1 and any(s.length > engine.shapes.budget for s in compiled.segments):
                raise ContentTooLong("the round does not fit a pass of the budget")  # halve it
            return [compiled]
        except ContentTooLong as error:  # the pass planner or the engine: too long for one pass
            if len(group) == 1:
                raise ContentTooLong(f"question {group[0]['id']!r} with the {field} does not fit one pass "
                                     f"({error.message}): shorten the {field} or the question's criteria, "
                                     "or start the server with a higher --token-budget",
                                     param=question_param(group[0]["id"])) from None
            half = len(group) // 2
            return await compile_group(group[:half]) + await compile_group(group[half:])

    rounds = await compile_group(queries)
    if check_total:
        policy.check_processed([c.program for c in rounds])
    return rounds

