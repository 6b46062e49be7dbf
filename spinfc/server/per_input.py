"""Errors of one input among many: a /v1/score request with `inputs` whose input alone is wrong (over a limit, too
long for a pass, content the frontend refuses) answers its other inputs, and the bad one with its error.

    answering(body, attempt)   runs `attempt(body)`; when it raises a 400 whose `param` is inside `inputs[i]`, that
                               input is set aside with its error (its `param` and message naming its place in the
                               request as sent) and the rest are tried again, until one attempt is answered or no
                               input is left (then the last error is the request's own: nothing can be answered)

An error about the request as a whole (a query, a pack, the queue) is raised at once. Each retry runs the checks
again on fewer inputs; a bad input costs a compile of the good ones at most, and good requests run once.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from spinfc.errors import CompileError, ContentTooLong
from spinfc.runtime.admit.refused import Refused
from spinfc.server.errors import ApiError, to_api_error

T = TypeVar("T")
B = TypeVar("B")
AT_INPUT = re.compile(r"^inputs\[(\d+)\]")


def at_input(error: Exception) -> tuple[int, ApiError] | None:
    """(the index in `inputs`, the 400) for an error about one input; None for any other."""
    if not isinstance(error, (ApiError, CompileError, Refused)):
        return None
    api = to_api_error(error)
    if isinstance(error, ContentTooLong) and error.content is not None and api.param is None:
        api = ApiError(api.status, api.code, api.message, f"inputs[{error.content}].messages")
    found = AT_INPUT.match(api.param or "")
    if api.status != 400 or found is None:
        return None
    return int(found.group(1)), api


def with_inputs(body: B, inputs: list) -> B:
    """`body` asking about `inputs` alone."""
    return {**body, "inputs": inputs} if isinstance(body, dict) else msgspec.structs.replace(body, inputs=inputs)


def relocated(api: ApiError, at: int, index: int) -> ApiError:
    """`api` about `inputs[at]` of a retry, said of `inputs[index]` of the request as sent."""
    old, new = f"inputs[{at}]", f"inputs[{index}]"
    return ApiError(api.status, api.code, api.message.replace(old, new), (api.param or "").replace(old, new, 1))


async def answering(body: B, attempt: Callable[[B], Awaitable[T]]) -> tuple[T, list[int], dict[int, ApiError]]:
    """`attempt`'s result on the inputs that can be answered, those inputs' indices in `body`'s `inputs`, and the
    error of each input set aside (by index). `body` is the decoded request (a struct) or a dict."""
    inputs = body["inputs"] if isinstance(body, dict) else body.inputs
    kept, failed = list(range(len(inputs))), {}
    while True:
        tried = body if len(kept) == len(inputs) else with_inputs(body, [inputs[i] for i in kept])
        try:
            return await attempt(tried), kept, failed
        except Exception as error:
            found = at_input(error)
            if found is None or found[0] >= len(kept):
                raise
            at, api = found
            if len(kept) == 1:  # nothing can be answered: the request's own error
                raise relocated(api, at, kept[at]) from None
            failed[kept[at]] = relocated(api, at, kept[at])
            del kept[at]
