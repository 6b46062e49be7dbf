"""/v1/decisions with `inputs`: every question asked of each input (a `state` or `messages`), each input read in
its own rounds, all the rounds in the engine's shared passes; answered per input as /v1/score answers its inputs.

    answer_inputs(...)   per_input.answering over `attempt`: an input that alone is wrong (its content over a limit,
                         too long for a pass beside a question, a part that is not read) is set aside with its error
                         (`param` inside `inputs[i]`), the rest answered; a mistake in the questions, or every input
                         wrong, is the request's own 400

An error of one input's rounds names the input: `state` becomes `inputs[2].state`; a question that does not fit a
pass beside this input's content is said of the content (`inputs[2].state`), since the others may fit.
"""

from __future__ import annotations

from spinfc.errors import CompileError, ContentTooLong
from spinfc.runtime.admit.refused import Refused
from spinfc.runtime.admit.scoring import score_compiled
from spinfc.runtime.decisions import decision_queries
from spinfc.runtime.decisions.rounds import check_decisions, compile_rounds, content_field
from spinfc.server.errors import ApiError, to_api_error
from spinfc.server.per_input import answering


def of_input(error: Exception, index: int, field: str) -> Exception:
    """`error` of compiling input `index`'s rounds, said of `inputs[index]` where it is about its content."""
    if not isinstance(error, (ApiError, CompileError, Refused)):
        return error  # not a mistake of the request (the engine's): as it is
    api = to_api_error(error)
    if api.status != 400:
        return error
    param = api.param or ""
    if isinstance(error, ContentTooLong):
        param = field
    elif not (param == field or param.startswith((f"{field}.", f"{field}["))):
        return error  # about the questions: the request's own
    at = f"inputs[{index}].{param}"
    message = at + api.message[len(api.param):] if api.param and api.message.startswith(api.param) else \
        f"{at}: {api.message}"
    return ApiError(api.status, api.code, message, at, api.headers)


async def answer_inputs(engine, body: dict, policy, extra_keys=()):
    """-> (per input answered: (its rounds, their scored parts)), the indices answered, {index: ApiError})."""
    async def attempt(tried: dict) -> list[tuple[list, list]]:
        queries = decision_queries(tried, extra_keys=extra_keys, codes=engine.codes)  # validates: names an input
        check_decisions(policy, tried, queries)
        per_input = []
        for i, item in enumerate(tried["inputs"]):
            try:
                per_input.append(await compile_rounds(engine, {**item, "questions": tried["questions"]}, queries,
                                                      policy, check_total=False))
            except Exception as error:
                raise of_input(error, i, content_field(item)) from None
        every = [c for rounds in per_input for c in rounds]
        policy.check_processed([c.program for c in every])
        scored = await score_compiled(engine, every)
        out, first = [], 0
        for rounds in per_input:
            out.append((rounds, scored[first:first + len(rounds)]))
            first += len(rounds)
        return out

    return await answering(body, attempt)
