"""The seed-shaped job as token ids, lowered to fixed-shape launches through spinfc's own compiler passes (what a
kernel or stack study runs without a server).

Token ids are random (throughput does not depend on them), so no tokenizer is involved: contents and questions
are made with their tokens already set, and the passes after `tokenize` (dedupe-prefixes, plan-packing, layout)
turn them into pass layouts, which `backend.launch.lower` turns into fixed-shape launches.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from spinfc.backend.graphs import GraphedModel
from spinfc.backend.launch import Launch, lower
from spinfc.ir.nodes import AnswerRead, Content, Option, OptionSlot, Program, Question
from spinfc.passes.dedupe_prefixes import dedupe_prefixes
from spinfc.passes import PassContext, layout, plan_packing, segment
from spinfc.shapes import Shapes


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


def random_contents(rng: random.Random, n: int, prefix: str, vocab: int) -> list[Content]:
    """n contents of 30..80 random tokens, named prefix0, prefix1, ..."""
    return [Content(f"{prefix}{i}", "", tokens=random_tokens(rng, rng.randint(30, 80), vocab)) for i in range(n)]


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


def relower(job: Job, rows: int, reads: int) -> Job:
    """The same layouts lowered with answer rows and reads padded to `rows`/`reads` (one launch shape)."""
    launches = [lower(l, rows_padded_to=rows, reads_padded_to=reads) for l in job.program.layouts]
    return Job(job.program, launches, job.reads)


def prepared(model, shapes, device: str):
    """The model as a study runs it: replayed from CUDA graphs on a GPU; as is on the CPU (--smoke)."""
    if not str(device).startswith("cuda"):
        return model
    graphed = GraphedModel(model, shapes)
    graphed.warm_up()
    return graphed


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
