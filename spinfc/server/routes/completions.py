"""POST /v1/completions: OpenAI's legacy completions, so a scoring client written for the OpenAI API or vLLM works
unchanged (lm-evaluation-harness's `local-completions` among them).

    prompt       a string, a list of strings, a list of token ids, or a list of token-id lists: one choice each
    echo         the prompt is part of the choice's text and, with `logprobs`, of its logprobs
    logprobs     k (0 to 20): per token its logprob and the k most likely tokens there (with the chosen one)
    max_tokens   tokens to generate (default 16); 0 generates nothing: with `echo` and `logprobs`, the scoring
                 call (every prompt token's logprob, from one packed read of all the prompts: server/completing.py)
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

from litestar import Request, post
from litestar.openapi.spec import Example
from litestar.params import Body

from spinfc.passes.plan_packing import too_long
from spinfc.passes.tokenize import encode_text
from spinfc.runtime.admit.policy import Policy
from spinfc.runtime.launch.generate import Sampling
from spinfc.server.completing import Completed, complete
from spinfc.server.context import call_context
from spinfc.server.errors import ApiError
from spinfc.server.hangup import while_connected
from spinfc.server.logprobs import Pieces, completion_logprobs, ids_in
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.routes.chat import MAX_COMPLETION_TOKENS, stop_strings
from spinfc.server.service import ServiceDep
from spinfc.shapes import Shapes
from spinfc.wire.completions import (
    Completion,
    CompletionChoice,
    CompletionRequest,
    CompletionUsage,
)

DEFAULT_MAX_TOKENS = 16  # OpenAI's
MAX_PROMPTS = 4096  # prompts in one request (each is one choice)
EXAMPLE = Example(summary="the scoring call: every prompt token's logprob, nothing generated", value={
    "prompt": "The capital of France is Paris.", "echo": True, "logprobs": 1, "max_tokens": 0})


@post("/v1/completions", status_code=200, responses=errors(*BODY_ROUTE))
async def completions(data: Annotated[CompletionRequest, Body(title="A completion request", examples=[EXAMPLE])],
                      service: ServiceDep, request: Request) -> Completion:
    refuse_unsupported(data)  # what can be checked without the model is checked first
    forms = prompt_forms(data.prompt)
    sampling = sampling_of(data)
    engine = service.ready_engine()
    ctx = call_context(request)
    service.check_model(data.model)
    if engine.codes:  # every completion (prompt logprobs included) reads the vocabulary
        raise ApiError(400, "not_a_language_model", f"the model {service.model_name!r} is a decision model: its head "
                       f"reads {len(engine.codes)} codes, not the vocabulary, so it neither completes nor scores a "
                       'prompt\'s tokens; ask /v1/score with codes = "all" or /v1/decisions with a choice',
                       param="model")
    check_texts(forms, data.prompt, sampling, ctx.policy(service.longest_token))  # before any tokenizing
    one_greedy = sampling.max_tokens == 1 and sampling.temperature == 0
    if sampling.max_tokens > 0 and not one_greedy:
        generator = service.generator
        if not ctx.features.get("generation", True) or generator is None or not generator.available:
            raise ApiError(400, "generation_disabled", "this server does not generate (--no-generation, or a model "
                           "that cannot): send max_tokens 0 (with echo and logprobs to score the prompt), or 1 "
                           "with temperature 0", param="max_tokens")
    return await while_connected(request, service, answer(service, ctx, data, forms, sampling))


async def answer(service, ctx, data: CompletionRequest, forms, sampling: Sampling) -> Completion:
    """The completion, holding an admission place; cancelled (a client that left, the shutdown deadline), its
    generation stops after the step in progress."""
    engine, vocab = service.ready_engine(), service.generator.model.config.vocab
    with service.admission.admit("generate" if sampling.max_tokens > 0 else "score", sampling.max_tokens):
        texts = [form for form in forms if isinstance(form, str)]
        encoded = iter(await service.generator.call(  # as /v1/score encodes a content: special tokens are text
            lambda tok: [encode_text(tok, text, bos=True) for text in texts]))
        prompts = [next(encoded) if isinstance(form, str) else tuple(form) for form in forms]
        check_prompts(prompts, data.prompt, vocab, engine.shapes, ctx.policy(service.longest_token))
        done = await complete(service, prompts, sampling, bool(data.echo), data.logprobs)
        choices = await service.generator.call(lambda tok: build_choices(tok, forms, prompts, done, data))
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(len(c.tokens) for c in done)
    return Completion(
        id=f"cmpl-{uuid.uuid4().hex}", object="text_completion", created=int(time.time()), model=service.model_name,
        system_fingerprint=service.fingerprint, choices=choices,
        usage=CompletionUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                              total_tokens=prompt_tokens + completion_tokens),
    )


# fields this server honours at one value only (or null); the schema says so too (openapi.one_value)
ONE_VALUE = {"n": 1, "best_of": 1, "stream": False, "suffix": None, "frequency_penalty": 0, "presence_penalty": 0,
             "logit_bias": {}}


def refuse_unsupported(data: CompletionRequest) -> None:
    """400 for a field this server honours only at one value, rather than an answer that ignores it."""
    for name, supported in ONE_VALUE.items():
        value = getattr(data, name)
        if value is not None and value != supported:
            raise ApiError(400, "unsupported_parameter", f"`{name}` {value!r} is not supported by /v1/completions "
                           f"on this server: it answers with {name} = {supported!r} only; omit it", param=name)


def prompt_forms(prompt) -> list[str | list[int]]:
    """The prompts of a request: a string, a list of strings, a list of token ids or a list of token-id lists (one
    form, as OpenAI's: `[[1, 2], "a"]` is refused), at most MAX_PROMPTS; 400 invalid_prompt otherwise."""
    if isinstance(prompt, str):
        return [prompt]
    hint = "send a string, a list of strings, a list of token ids or a list of lists of token ids"
    if not prompt:
        raise ApiError(400, "invalid_prompt", f"`prompt` is an empty list: {hint}", param="prompt")
    if len(prompt) > MAX_PROMPTS:
        raise ApiError(400, "too_many_prompts", f"`prompt` is a list of {len(prompt):,}: send at most "
                       f"{MAX_PROMPTS:,} prompts a request, and the rest in further requests", param="prompt")
    token = lambda t: isinstance(t, int) and not isinstance(t, bool)  # noqa: E731
    form = "strings" if isinstance(prompt[0], str) else "token ids" if token(prompt[0]) else "lists of token ids"
    fits = {"strings": lambda item: isinstance(item, str), "token ids": token,
            "lists of token ids": lambda item: isinstance(item, list) and all(map(token, item))}[form]
    for i, item in enumerate(prompt):  # the first item sets the form: the first that does not fit is blamed
        if not fits(item):
            raise ApiError(400, "invalid_prompt", f"prompt[{i}] is a {type(item).__name__} in a list of {form}: "
                           f"{hint}, one form a request", param=f"prompt[{i}]")
    return [list(prompt)] if form == "token ids" else list(prompt)


def prompt_param(given, i: int) -> str:
    """The JSON path of prompt `i`: `prompt` where the request sent one, else `prompt[i]`."""
    return "prompt" if isinstance(given, str) or not isinstance(given[0], list | str) else f"prompt[{i}]"


def check_texts(forms, given, sampling: Sampling, policy: Policy) -> None:
    """Before anything is tokenized, the string prompts and the tokens to draw against the call's limits
    (`Policy.check_prompt_texts`); one greedy token is the read pass's, not a draw."""
    drawn = sampling.max_tokens > 1 or sampling.temperature != 0
    policy.check_prompt_texts([(prompt_param(given, i), len(form)) for i, form in enumerate(forms)
                               if isinstance(form, str)], len(forms) * sampling.max_tokens if drawn else 0)


def check_prompts(prompts, given, vocab: int, shapes: Shapes, policy: Policy) -> None:
    """Each prompt has tokens, valid ids, fits the call's limits (`Policy.check_prompt_tokens`) and one pass (alone,
    up to `shapes.largest`)."""
    for i, tokens in enumerate(prompts):
        param = prompt_param(given, i)
        if not tokens:
            raise ApiError(400, "empty_prompt", f"{param} has no tokens (the model adds no BOS): give it some text",
                           param=param)
        bad = next((t for t in tokens if not 0 <= t < vocab), None)
        if bad is not None:
            raise ApiError(400, "invalid_token_id", f"{param} holds token id {bad}, outside the model's vocabulary "
                           f"of {vocab:,} ids", param=param)
        policy.check_prompt_tokens(param, len(tokens))
        if len(tokens) > shapes.largest:
            raise too_long(param, len(tokens), shapes, param=param)
    policy.check_prompts_processed(sum(len(tokens) for tokens in prompts))


def sampling_of(data: CompletionRequest) -> Sampling:
    max_tokens = DEFAULT_MAX_TOKENS if data.max_tokens is None else data.max_tokens
    if max_tokens > MAX_COMPLETION_TOKENS:
        raise ApiError(400, "max_tokens_exceeded", f"max_tokens {max_tokens:,} is over this server's limit of "
                       f"{MAX_COMPLETION_TOKENS:,} generated tokens: ask for fewer", param="max_tokens")
    return Sampling(max_tokens=max_tokens, temperature=1.0 if data.temperature is None else data.temperature,
                    top_p=1.0 if data.top_p is None else data.top_p, seed=data.seed, stop=stop_strings(data.stop))


def build_choices(tokenizer, forms, prompts, done: list[Completed], data: CompletionRequest) -> list[CompletionChoice]:
    """The choices, on the generation thread (token texts need the tokenizer)."""
    pieces = Pieces(tokenizer, ids_in([c.scores for c in done], [c.steps for c in done])) \
        if data.logprobs is not None else None
    choices = []
    for i, (form, tokens, completed) in enumerate(zip(forms, prompts, done)):
        shown = "" if not data.echo else form if isinstance(form, str) else \
            tokenizer.decode(list(tokens), skip_special_tokens=True)
        text = shown + completed.text
        logprobs = None
        if pieces is not None:
            logprobs = completion_logprobs(text, pieces, completed.scores if data.echo else None, len(shown),
                                           completed.steps, data.logprobs)
        choices.append(CompletionChoice(index=i, text=text, logprobs=logprobs,
                                        finish_reason=completed.finish_reason))
    return choices
