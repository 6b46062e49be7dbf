"""Jobs and random-weight models for `benchmarks/gpu.py`, built through spinfc's own compiler passes.

Token ids are random (throughput does not depend on them), so no tokenizer is involved: contents and questions
are made with their tokens already set, and the passes after `tokenize` (dedupe-prefixes, plan-packing, layout)
turn them into pass layouts, which `backend.launch.lower` turns into fixed-shape launches.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from spinfc.backend.launch import Launch, lower
from spinfc.ir.nodes import AnswerRead, Content, Option, OptionSlot, Program, Question
from spinfc.passes.dedupe_prefixes import dedupe_prefixes
from spinfc.passes import PassContext, layout, plan_packing, segment
from spinfc.shapes import Shapes
from spinfc.runtime.models.gemma3 import Gemma3Config
from spinfc.runtime.weights.config import ModelConfig


@dataclass
class Job:
    """A compiled job: its program (after layout), its launches (one fixed shape), and the reads of each."""

    program: Program
    launches: list[Launch]  # on the CPU, each [budget] rows, rows/reads padded to one fixed count
    reads: list[tuple[AnswerRead, ...]]  # per launch, the real reads (the first len(...) outputs)

    @property
    def shape(self) -> tuple[int, int, int]:
        launch = self.launches[0]
        return launch.budget, int(launch.rows.shape[0]), int(launch.read_row.shape[0])

    @property
    def fill(self) -> float:
        """Rows holding a content or its tree, over all rows of all passes."""
        used = sum(stop - start for l in self.program.layouts for start, stop in l.spans)
        return used / (len(self.launches) * self.program.plan.budget)

    def scores(self, outputs: list[torch.Tensor]) -> dict[tuple[str, int, int, int], torch.Tensor]:
        """{(content id, question, option, step): logprob (a 0-d float32 tensor)} from one output per launch."""
        found = {}
        for reads, out in zip(self.reads, outputs):
            for k, read in enumerate(reads):
                found[(self.program.contents[read.content].id, read.question, read.option, read.step)] = out[k]
        return found


def random_tokens(rng: random.Random, n: int, vocab: int) -> tuple[int, ...]:
    return tuple(rng.randrange(1, vocab) for _ in range(n))


def make_program(contents: list[Content], questions: list[Question], budget: int, block: int) -> Program:
    return Program(model="random", contents=tuple(contents), queries=(), questions=tuple(questions),
                   budget=budget, block=block)


def compile_job(program: Program, rows: int | None = None, reads: int | None = None) -> Job:
    """dedupe-prefixes, segment, plan-packing and layout (the compiler's passes, the engine's packer), then lower
    every pass to one shape (answer rows and reads padded to the largest pass's counts, or to `rows`/`reads`)."""
    ctx = PassContext(shapes=Shapes(program.budget, program.block))
    program = layout(plan_packing(segment(dedupe_prefixes(program), ctx), ctx), ctx)
    rows = rows or max(len({r.row for r in l.reads}) for l in program.layouts)
    reads = reads or max(len(l.reads) for l in program.layouts)
    launches = [lower(l, rows_padded_to=rows, reads_padded_to=reads) for l in program.layouts]
    return Job(program, launches, [l.reads for l in program.layouts])


def seed_questions(rng: random.Random, n: int, tokens: int, vocab: int) -> list[Question]:
    """n two-option questions of `tokens` tokens each; the options are one token each (" yes" / " no")."""
    yes, no = random_tokens(rng, 2, vocab)
    slot = OptionSlot((Option(" yes", (yes,)), Option(" no", (no,))))
    return [Question(f"q{j}", (), "", slot, random_tokens(rng, tokens, vocab)) for j in range(n)]


def seed_job(vocab: int, *, contents: int = 24, content_tokens: int = 470, questions: int = 56,
             question_tokens: int = 20, block: int = 64, max_budget: int = 20480, seed: int = 0,
             reverse: bool = False) -> Job:
    """The seed-shaped job. The budget is chosen for fill: the fewest passes whose equal share of the contents
    fits `max_budget`, each pass exactly that share of whole spans (every pass full but for block rounding).
    `reverse` places the contents in the opposite order (same budget): every content lands at another offset,
    in another pass, next to other neighbours."""
    rng = random.Random(seed)
    made = [Content(f"c{i}", "", tokens=random_tokens(rng, content_tokens, vocab)) for i in range(contents)]
    asked = seed_questions(rng, questions, question_tokens, vocab)
    span = content_tokens + questions * question_tokens  # rows of one content with its tree (no shared prefixes)
    span_rows = -(-span // block) * block
    passes = next(p for p in range(1, contents + 1) if math.ceil(contents / p) * span_rows <= max_budget)
    budget = math.ceil(contents / passes) * span_rows
    if reverse:
        made = made[::-1]
    return compile_job(make_program(made, asked, budget, block))


def small_job(vocab: int, *, contents: int, budget: int, block: int, seed: int,
              content_tokens: tuple[int, int] = (20, 300), questions: int = 5) -> Job:
    """A varied job for parity: contents of random lengths, questions of 3..12 tokens with 2..3 options of
    1..3 tokens (so options share first tokens and trees branch below the prompts)."""
    rng = random.Random(seed)
    made = [Content(f"c{i}", "", tokens=random_tokens(rng, rng.randint(*content_tokens), vocab))
            for i in range(contents)]
    asked = []
    for j in range(questions):
        first = rng.randrange(1, vocab)
        options = tuple(Option(f"o{o}", (first,) + random_tokens(rng, rng.randint(0, 2), vocab))
                        for o in range(rng.randint(2, 3)))
        asked.append(Question(f"q{j}", (), "", OptionSlot(options), random_tokens(rng, rng.randint(3, 12), vocab)))
    return compile_job(make_program(made, asked, budget, block))


# ---- random-weight models ------------------------------------------------------------------------------------


def random_state_dict(config: ModelConfig, device, seed: int) -> dict[str, torch.Tensor]:
    """float32 weights in Hugging Face naming, scaled so activations stay O(1) and the next-token distributions
    are far from uniform (so a parity check compares something)."""
    g = torch.Generator(device=device).manual_seed(seed)
    c = config
    gemma = c.family == "gemma3"

    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=g, device=device) * std

    def norm(n):  # Gemma multiplies by (1 + w)
        return normal(n, std=0.1) + (0.0 if gemma else 1.0)

    # Gemma scales embeddings by sqrt(hidden) and ties them to its LM head: a smaller std keeps each token from
    # predicting itself with a logit of sqrt(hidden).
    state = {"model.embed_tokens.weight": normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5 if gemma else 1.0),
             "model.norm.weight": norm(c.hidden)}
    if not c.tie_embeddings:
        state["lm_head.weight"] = normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5)  # logits ~ N(0, 1/4)
    shapes = {"q_proj": (c.heads * c.head_dim, c.hidden), "k_proj": (c.kv_heads * c.head_dim, c.hidden),
              "v_proj": (c.kv_heads * c.head_dim, c.hidden), "o_proj": (c.hidden, c.heads * c.head_dim)}
    mlp = {"gate_proj": (c.intermediate, c.hidden), "up_proj": (c.intermediate, c.hidden),
           "down_proj": (c.hidden, c.intermediate)}
    for i in range(c.layers):
        p = f"model.layers.{i}."
        # The blocks' output projections are scaled down, so each layer adds a small update to the residual
        # stream, as in a trained model (at full scale, bf16 noise alone grows past a useful tolerance).
        for name, (n_out, n_in) in shapes.items():
            std = n_in**-0.5 * (0.2 if name == "o_proj" else 1.0)
            state[p + f"self_attn.{name}.weight"] = normal(n_out, n_in, std=std)
        for name, (n_out, n_in) in mlp.items():
            std = n_in**-0.5 * (0.2 if name == "down_proj" else 1.0)
            state[p + f"mlp.{name}.weight"] = normal(n_out, n_in, std=std)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for name in norms:
            state[p + f"{name}.weight"] = norm(c.hidden)
        if gemma:  # Gemma norms each block's output before adding it: scale those norms down instead
            for name in ("post_attention_layernorm", "post_feedforward_layernorm"):
                state[p + f"{name}.weight"] = normal(c.hidden, std=0.02) - 0.8
        if c.family in ("qwen3", "gemma3"):
            state[p + "self_attn.q_norm.weight"] = norm(c.head_dim)
            state[p + "self_attn.k_norm.weight"] = norm(c.head_dim)
    return state


SMALL_CONFIGS = {
    # head dim 128 (Llama 3's), GQA 4:2
    "llama": ModelConfig(family="llama", hidden=512, layers=4, heads=4, kv_heads=2, head_dim=128, intermediate=1024,
                         vocab=8192, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False),
    # head dim 64, q/k norms
    "qwen3": ModelConfig(family="qwen3", hidden=256, layers=3, heads=4, kv_heads=2, head_dim=64, intermediate=768,
                         vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=False),
    # head dim 256, one kv head, sliding-window layers (window 48 positions), GELU-tanh, (1 + w) norms
    "gemma3": Gemma3Config(family="gemma3", hidden=384, layers=4, heads=4, kv_heads=1, head_dim=256,
                          intermediate=1024, vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=True,
                          rope_local_theta=10000.0, sliding_window=48, sliding_layers=(True, True, False, True),
                          query_pre_attn_scalar=256.0),
}

LLAMA3_8B = ModelConfig(family="llama", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                        intermediate=14336, vocab=128256, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)


def non_embedding_params(c: ModelConfig) -> int:
    """Parameters that every token multiplies through (the embedding lookup and the LM head excluded)."""
    per_layer = c.hidden * (c.heads + 2 * c.kv_heads) * c.head_dim + c.heads * c.head_dim * c.hidden
    per_layer += 3 * c.hidden * c.intermediate + 2 * c.hidden
    return c.layers * per_layer + c.hidden
