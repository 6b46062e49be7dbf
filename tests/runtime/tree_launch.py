"""Lay out contents and their question trees into one `Launch` by hand, independent of spinfc's passes, and score
the same questions with transformers, one sequence per question and option.

Each content is followed depth-first by its questions: a question's prompt branches off the content's last token,
and each option's tokens branch off the prompt's last token. Positions restart along each branch; end[j] is the
end of the subtree of row j. Rows between and after spans are padding (position 0, end[j] = j + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spinfc.backend.launch import Launch


@dataclass(frozen=True)
class Question:
    prompt: tuple[int, ...]
    options: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Case:
    content: tuple[int, ...]
    questions: tuple[Question, ...]

    @property
    def size(self) -> int:
        return len(self.content) + sum(len(q.prompt) + sum(map(len, q.options)) for q in self.questions)

    def reads(self) -> list[tuple[int, int, int]]:
        """(question, option, step) of every token scored, in layout order."""
        return [
            (qi, oi, step)
            for qi, question in enumerate(self.questions)
            for oi, option in enumerate(question.options)
            for step in range(len(option))
        ]


def build_launch(placed: list[tuple[int, Case]], budget: int, pad: int = 0) -> tuple[Launch, list[tuple]]:
    """One launch holding each case at its start row; returns it and, per read, (case index, question, option,
    step) in the order of `launch.read_token`."""
    tokens, positions, ends = [pad] * budget, [0] * budget, [j + 1 for j in range(budget)]
    spans, reads = [], []  # reads: (row, token, key)
    for index, (start, case) in enumerate(placed):
        if start + case.size > budget:
            raise ValueError(f"case {index} at {start} does not fit in {budget} rows")
        row, stop = start, start + case.size

        def emit(token, position, end):
            nonlocal row
            tokens[row], positions[row], ends[row] = token, position, end
            row += 1
            return row - 1

        for p, token in enumerate(case.content):
            last = emit(token, p, stop)
        depth = len(case.content)
        for qi, question in enumerate(case.questions):
            q_stop = row + len(question.prompt) + sum(map(len, question.options))
            prompt_last = last
            for p, token in enumerate(question.prompt):
                prompt_last = emit(token, depth + p, q_stop)
            for oi, option in enumerate(question.options):
                o_stop = row + len(option)
                previous = prompt_last
                for step, token in enumerate(option):
                    reads.append((previous, token, (index, qi, oi, step)))
                    previous = emit(token, depth + len(question.prompt) + step, o_stop)
        assert row == stop
        spans.append((start, stop))
    rows = sorted({r for r, _, _ in reads})
    where = {r: i for i, r in enumerate(rows)}
    launch = Launch(
        tokens=torch.tensor(tokens, dtype=torch.int64),
        positions=torch.tensor(positions, dtype=torch.int64),
        ends=torch.tensor(ends, dtype=torch.int32),
        spans=tuple(spans),
        rows=torch.tensor(rows, dtype=torch.int64),
        read_row=torch.tensor([where[r] for r, _, _ in reads], dtype=torch.int64),
        read_token=torch.tensor([t for _, t, _ in reads], dtype=torch.int64),
    )
    return launch, [key for _, _, key in reads]


@torch.inference_mode()
def transformers_logprobs(hf_model, case: Case) -> torch.Tensor:
    """The case's reads scored by transformers, each question and option as its own sequence (batched, padded on
    the right, which a causal model never sees): [N] float32 in the order of `Case.reads`. The LM head runs only
    at the rows that score an option token."""
    sequences, targets = [], []  # targets: (sequence, row, token)
    for question in case.questions:
        prefix = list(case.content) + list(question.prompt)
        for option in question.options:
            targets += [(len(sequences), len(prefix) - 1 + step, token) for step, token in enumerate(option)]
            sequences.append(prefix + list(option))
    width = max(map(len, sequences))
    ids = torch.zeros(len(sequences), width, dtype=torch.int64)
    mask = torch.zeros(len(sequences), width, dtype=torch.int64)
    for index, sequence in enumerate(sequences):
        ids[index, : len(sequence)] = torch.tensor(sequence)
        mask[index, : len(sequence)] = 1
    hidden = hf_model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [B, S, D], final-normed
    picked = torch.stack([hidden[b, row] for b, row, _ in targets])  # [N, D]
    logits = hf_model.lm_head(picked).float()  # [N, V]
    cap = getattr(hf_model.config, "final_logit_softcapping", None)
    if cap is not None:  # Gemma 4 (Gemma 3's config has the key, at None)
        logits = torch.tanh(logits / cap) * cap
    logprobs = torch.log_softmax(logits, dim=-1)  # [N, V]
    return logprobs[torch.arange(len(targets)), torch.tensor([token for _, _, token in targets])]
