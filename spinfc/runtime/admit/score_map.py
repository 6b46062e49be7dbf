"""`ScoreMap`: a program's read logprobs summed into option logprobs, vectorised (the engine's per-pass results)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spinfc.ir.nodes import AnswerRead, Question
from spinfc.runtime.deliver.results import ContentScores, _options, content_scores


class ScoreMap:
    """How the reads of one program's segments sum into option logprobs, checked once per program (every content of
    a program is asked the same questions, so its segments' reads come in the same order). `scores(logprobs)` is
    `content_scores` for one segment's logprobs, vectorised."""

    def __init__(self, questions: Sequence[Question], reads: Sequence[AnswerRead]) -> None:
        content_scores(questions, reads, [0.0] * len(reads))  # every option read once per token, or ValueError
        sizes = [len(_options(q)) for q in questions]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # [Q + 1]
        self.index = np.fromiter((self.offsets[r.question] + r.option for r in reads), np.int64, len(reads))
        self.total = int(self.offsets[-1])

    def scores(self, logprobs: np.ndarray) -> ContentScores:
        if len(logprobs) != len(self.index):
            raise ValueError(f"{len(self.index)} reads but {len(logprobs)} logprobs")
        sums = np.bincount(self.index, weights=np.asarray(logprobs, np.float64), minlength=self.total).tolist()
        return tuple(tuple(sums[a:b]) for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))
