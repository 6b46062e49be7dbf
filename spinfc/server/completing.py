"""Running a completion: the prompts' tokens, their logprobs from one packed pass, and what is generated after them.

    tokens       strings are encoded on the generation thread (with a BOS where the model uses one, as /v1/score
                 encodes a content); token-id prompts are used as they are
    read pass    `Engine.read_prompts` (runtime.prompt_logprobs): every prompt read once, packed into shared passes
                 with other completions' prompts by the engine's scheduler; withdrawn when the client leaves
    generation   `runtime.generate`, one prompt after the other; a greedy single token (max_tokens 1,
                 temperature 0: lm-evaluation-harness's scoring call) is the read pass's most likely next token

"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from spinfc.runtime.admit.chat_format import ChatPrompt, end_tokens
from spinfc.runtime.launch.generate import Generation, Sampling, StepLogprobs, first_stop
from spinfc.runtime.launch.prompt_logprobs import PromptScores


@attrs.frozen
class Completed:
    """One prompt's completion: the generated text and tokens (the end token included, as usage counts them),
    the steps' logprobs, why it ended, and the prompt's scores when they were read."""

    text: str
    tokens: tuple[int, ...]
    steps: tuple[StepLogprobs, ...]
    finish_reason: str
    scores: PromptScores | None


async def read_prompts(service, prompts: Sequence[tuple[int, ...]], top: int) -> list[PromptScores]:
    """Every prompt's token logprobs and `top` most likely next tokens, in the engine's shared prompt passes."""
    return await service.ready_engine().read_prompts(prompts, top)


def greedy_token(scores: PromptScores, ends: frozenset[int], stops: Sequence[str], pieces: dict[int, str],
                 top: int | None) -> Completed:
    """max_tokens 1 at temperature 0 from the read pass: the most likely token after the prompt."""
    token, logprob = scores.top[-1][0]
    step = StepLogprobs(token, logprob, scores.top[-1][:top or 0])
    if token in ends:
        return Completed("", (token,), (), "stop", scores)
    text = pieces[token]
    cut = first_stop(text, stops)
    if cut is not None:
        return Completed(text[:cut], (token,), (step,) if top is not None else (), "stop", scores)
    return Completed(text, (token,), (step,) if top is not None else (), "length", scores)


async def complete(service, prompts: list[tuple[int, ...]], sampling: Sampling, echo: bool,
                   top: int | None) -> list[Completed]:
    """Each prompt's completion. The read pass runs when the prompt's logprobs are asked for (`echo` with
    `top` not None) or it gives the answer (one greedy token); the generator runs for everything else."""
    generator = service.generator
    one_greedy = sampling.max_tokens == 1 and sampling.temperature == 0
    scores: list[PromptScores | None] = [None] * len(prompts)
    if (echo and top is not None) or one_greedy:
        scores = await read_prompts(service, prompts, max(1, top or 0) if one_greedy else top)
    if sampling.max_tokens == 0:
        return [Completed("", (), (), "length", s if echo else None) for s in scores]
    ends = await generator.call(end_tokens)
    if one_greedy:
        firsts = {s.top[-1][0][0] for s in scores}
        pieces = await generator.call(lambda tok: {t: tok.decode([t], skip_special_tokens=False) for t in firsts})
        return [attrs.evolve(greedy_token(s, ends, sampling.stop, pieces, top), scores=s if echo else None)
                for s in scores]
    done = []
    for prompt, score in zip(prompts, scores):
        raw = ChatPrompt(tokens=prompt, end_tokens=ends, template="none")
        answer: Generation = await generator.run(raw, sampling, top_logprobs=top)
        done.append(Completed(answer.text, answer.tokens, answer.logprobs, answer.finish_reason,
                              score if echo else None))
    return done
