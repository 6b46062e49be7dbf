"""Prompt logprobs: every token of a prompt scored from ONE packed pass, as /v1/completions with `echo` needs.

    prompts (token ids) -> a Program whose contents are the prompts and which reads its contents (no questions,
    no floor) -> segment, plan-packing, layout (every content row is a `ContentRow`) -> one `Launch` per pass, trimmed to
    the used blocks -> `Model.hidden` (the hidden states of every content row) -> the LM head in slices of rows:
    log_softmax over the vocabulary, each row's next prompt token and its `top` most likely tokens

Many prompts share a pass (each in its own span, as contents do), and a prompt is read once: row i's output gives
log p(token i + 1 | tokens 0..i), and the last row's the distribution of the token after the prompt. The chosen
token's logprob and the top tokens come from the same float32 log_softmax, so a token that is the most likely
one has exactly the top logprob (lm-evaluation-harness's `is_greedy` compares them for equality).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import attrs
import torch

from spinfc.backend.launch import Launch, lower
from spinfc.ir.nodes import Content, PassLayout, Program
from spinfc.passes import PassContext, layout, plan_packing, segment
from spinfc.shapes import Shapes, round_up

HEAD_ROWS = 256  # rows per slice of the LM head: [256, V] float32 logits at a time (268 MB at Gemma's 262k)


@attrs.frozen
class PromptScores:
    """One prompt's scores: `logprobs[i]` is log p(tokens[i + 1] | tokens[:i + 1]) (one fewer than the tokens);
    `top[i]` the `top` most likely tokens after tokens[:i + 1] as (token, logprob), most likely first; `top[-1]`
    (the token after the prompt) is the first token a greedy completion would draw."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]
    top: tuple[tuple[tuple[int, float], ...], ...]


def prompt_program(prompts: Sequence[Sequence[int]], model: str, budget: int, block: int, pad: int = 0,
                   largest: int | None = None) -> Program:
    """The prompts laid out in passes of `budget` rows, every content row read; a prompt longer than the budget
    alone in a pass of up to `largest` rows (the engine's `Shapes.largest`; default the budget). Raises
    `ContentTooLong` (content_too_long) for a prompt longer than that."""
    contents = tuple(Content(id=f"prompt-{i}", text="", tokens=tuple(p)) for i, p in enumerate(prompts))
    program = Program(model=model, contents=contents, queries=(), budget=budget, block=block, pad=pad,
                      read_contents=True)
    largest = budget if largest is None else largest
    ctx = PassContext(shapes=Shapes(budget, block, trim=largest > budget, largest=largest))
    return layout(plan_packing(segment(program, ctx), ctx), ctx)


def trimmed_rows(lay: PassLayout, block: int) -> int:
    """The rows a laid-out pass is trimmed to: up to its last span, rounded up to the block (the rest is padding no
    row sees)."""
    stop = max((stop for _, stop in lay.spans), default=0)
    return min(lay.budget, max(block, round_up(stop, block)))


@torch.inference_mode()
def score_prompts(model, program: Program, top: int, lock: threading.Lock | None = None) -> list[PromptScores]:
    """Every prompt's `PromptScores`, in program order: one forward per pass of `program` (under `lock`, the
    model's, so engine passes and generation steps take turns with it). `model` is a stack (`Model.hidden`)."""
    tokens = [content.tokens for content in program.contents]
    logprobs: list[list[float]] = [[0.0] * max(0, len(t) - 1) for t in tokens]
    tops: list[list[tuple]] = [[()] * len(t) for t in tokens]
    lock = lock or threading.Lock()
    for lay in program.layouts:
        launch = trimmed(lower(lay), trimmed_rows(lay, program.block)).to(model.device)
        with lock:
            hidden = model.hidden(launch)  # [R, D]: the content rows, in row order
        rows = lay.content_rows  # the same order as launch.rows
        for start in range(0, len(rows), HEAD_ROWS):
            part = rows[start:start + HEAD_ROWS]
            logits = model.head_logits(hidden[start:start + len(part)])  # [r, V] float32
            scores = torch.log_softmax(logits, dim=-1)  # [r, V]
            best = torch.topk(scores, top, dim=-1) if top else None
            next_ids = [tokens[r.content][r.position + 1] if r.position + 1 < len(tokens[r.content]) else 0
                        for r in part]
            chosen = scores.gather(1, torch.tensor(next_ids, device=scores.device)[:, None])[:, 0].cpu().tolist()
            best_ids = best.indices.cpu().tolist() if best is not None else [[] for _ in part]
            best_values = best.values.cpu().tolist() if best is not None else [[] for _ in part]
            for k, r in enumerate(part):
                if r.position + 1 < len(tokens[r.content]):
                    logprobs[r.content][r.position] = chosen[k]
                tops[r.content][r.position] = tuple(zip(best_ids[k], best_values[k]))
    return [PromptScores(tuple(t), tuple(lp), tuple(tp)) for t, lp, tp in zip(tokens, logprobs, tops)]


def trimmed(launch: Launch, rows: int) -> Launch:
    """The launch cut to its first `rows` rows (every span and every answer row lies below `rows`)."""
    return dataclasses.replace(launch, tokens=launch.tokens[:rows], positions=launch.positions[:rows],
                               ends=launch.ends[:rows])
