"""Token ids and their log-probabilities as OpenAI writes them: the legacy completions shape (`tokens`,
`token_logprobs`, `top_logprobs`, `text_offset`) and the chat shape (`content[*]` with `top_logprobs`).

A token's text is `tokenizer.decode([id])` (special tokens kept). `text_offset` is where each token's text starts
in the choice's text, found by walking the text; a token whose text is not there (a BOS the tokenizer added, a
piece of a character split across tokens) takes the offset where the walk stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spinfc.runtime.launch.generate import StepLogprobs
from spinfc.runtime.launch.prompt_logprobs import PromptScores
from spinfc.wire.completions import ChatLogprobs, CompletionLogprobs, TokenLogprob, TopLogprob


class Pieces:
    """Token id -> its text, decoded once per id (call on the thread that owns the tokenizer)."""

    def __init__(self, tokenizer, ids: Iterable[int]):
        unique = sorted(set(ids))
        texts = tokenizer.batch_decode([[i] for i in unique], skip_special_tokens=False) if unique else []
        self.text = dict(zip(unique, texts))

    def __getitem__(self, token: int) -> str:
        return self.text[token]


def ids_in(scores: Sequence[PromptScores | None], steps: Sequence[Sequence[StepLogprobs]]) -> set[int]:
    """Every token id whose text a response may show."""
    ids: set[int] = set()
    for score in scores:
        if score is not None:
            ids.update(score.tokens)
            ids.update(token for top in score.top for token, _ in top)
    for run in steps:
        for step in run:
            ids.add(step.token)
            ids.update(token for token, _ in step.top)
    return ids


def offsets(text: str, pieces: Sequence[str], start: int = 0) -> list[int]:
    """Where each piece starts in `text`, walking from `start` (see the module's docstring)."""
    out, at = [], start
    for piece in pieces:
        found = text.find(piece, at, at + len(piece) + 4) if piece else -1
        out.append(found if found >= 0 else at)
        if found >= 0:
            at = found + len(piece)
    return out


def top_dict(pairs: Iterable[tuple[int, float]], pieces: Pieces, chosen: tuple[int, float] | None) -> dict:
    """The top tokens and the chosen one as {text: logprob} (tokens of the same text keep the higher logprob)."""
    out: dict[str, float] = {}
    for token, logprob in [*pairs, *([chosen] if chosen else [])]:
        text = pieces[token]
        out[text] = max(out.get(text, float("-inf")), logprob)
    return out


def completion_logprobs(text: str, pieces: Pieces, prompt: PromptScores | None, prompt_text_end: int,
                        steps: Sequence[StepLogprobs], top: int) -> CompletionLogprobs:
    """The legacy shape for one choice: the prompt's tokens first when `prompt` is given (echo; the first has
    null logprobs), then each generated step. `prompt_text_end` is where the generated text starts in `text`."""
    tokens: list[int] = []
    logprobs: list[float | None] = []
    tops: list[dict | None] = []
    if prompt is not None:
        tokens.extend(prompt.tokens)
        logprobs.extend([None, *prompt.logprobs])
        tops.append(None)
        for i, logprob in enumerate(prompt.logprobs):  # row i predicts token i + 1
            tops.append(top_dict(prompt.top[i][:top], pieces, (prompt.tokens[i + 1], logprob)))
    for step in steps:
        tokens.append(step.token)
        logprobs.append(step.logprob)
        tops.append(top_dict(step.top[:top], pieces, (step.token, step.logprob)))
    texts = [pieces[t] for t in tokens]
    echoed = len(prompt.tokens) if prompt is not None else 0
    where = offsets(text, texts[:echoed]) + offsets(text, texts[echoed:], prompt_text_end)
    return CompletionLogprobs(tokens=texts, token_logprobs=logprobs, top_logprobs=tops, text_offset=where)


def chat_logprobs(pieces: Pieces, steps: Sequence[StepLogprobs], top: int) -> ChatLogprobs:
    """The chat shape: one entry per generated token, each with its `top` most likely tokens."""
    def entry(token: int, logprob: float) -> TopLogprob:
        text = pieces[token]
        return TopLogprob(token=text, logprob=logprob, bytes=list(text.encode("utf-8")))

    content = []
    for step in steps:
        chosen = entry(step.token, step.logprob)
        content.append(TokenLogprob(token=chosen.token, logprob=chosen.logprob, bytes=chosen.bytes,
                                    top_logprobs=[entry(t, lp) for t, lp in step.top[:top]]))
    return ChatLogprobs(content=content)
