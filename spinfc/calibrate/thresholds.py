"""Thresholds from scores and labels: the precision-recall curve, the threshold meeting a target, reliability bins.

A content is flagged when its score is at least the threshold. For each distinct score t (highest first) the
curve has precision(t) = TP / (TP + FP) and recall(t) = TP / positives among the contents scoring >= t.

    target "f1"              the threshold of the best F1 (ties: the higher threshold, fewer flags)
    target "precision=0.9"   the lowest threshold whose precision is at least 0.9 (the most recall at it)
    target "recall=0.8"      the highest threshold whose recall is at least 0.8 (the most precision at it)

When no threshold meets a precision target, the one with the best precision is taken and `met` is False.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from spinfc.bulk.errors import BulkError
from spinfc.frontend.pack_calibration import TARGET


TARGET_HELP = 'a target is "f1", "precision=P" or "recall=R" with P, R in (0, 1]'


def check_target(target: str) -> None:
    """BulkError unless `target` is f1, precision=P or recall=R."""
    if not TARGET.fullmatch(target) or target.endswith("=0"):
        raise BulkError(f"--target {target!r}: {TARGET_HELP}, e.g. --target precision=0.9")


@attrs.frozen
class Curve:
    thresholds: np.ndarray  # distinct scores, descending
    precision: np.ndarray
    recall: np.ndarray
    positives: int
    rows: int


@attrs.frozen
class Choice:
    threshold: float
    precision: float
    recall: float
    f1: float
    support: int  # labelled positives
    rows: int
    met: bool  # whether the target was reached


def pr_curve(scores: Sequence[float], labels: Sequence[bool]) -> Curve:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    tp, fp = np.cumsum(y), np.cumsum(~y)
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # the last index of each distinct score
    positives = int(y.sum())
    precision = tp[last] / (tp[last] + fp[last])
    recall = tp[last] / positives if positives else np.zeros(len(last))
    return Curve(s[last], precision, recall, positives, len(s))


def choose(curve: Curve, target: str) -> Choice:
    """The threshold for `target` ("f1", "precision=P" or "recall=R"); see the module docstring."""
    p, r = curve.precision, curve.recall
    f1 = np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-12), 0.0)
    met = True
    if target == "f1":
        # the first maximum: the highest threshold; F1s equal but for rounding (two cuts of the same 2pr / (p + r)
        # from other p and r) are a tie, which the higher threshold takes
        k = int(np.flatnonzero(f1 >= f1.max() * (1 - 1e-12))[0])
    else:
        kind, _, value = target.partition("=")
        goal = float(value)
        if kind == "precision":
            ok = np.nonzero(p >= goal - 1e-12)[0]
            met = len(ok) > 0
            k = int(ok[-1]) if met else int(np.argmax(p))
        elif kind == "recall":
            ok = np.nonzero(r >= goal - 1e-12)[0]
            met = len(ok) > 0
            k = int(ok[0]) if met else len(r) - 1
        else:
            raise ValueError(f"unknown target {target!r}: use f1, precision=P or recall=R")
    return Choice(float(curve.thresholds[k]), float(p[k]), float(r[k]), float(f1[k]), curve.positives, curve.rows,
                  met)


def reliability(scores: Sequence[float], labels: Sequence[bool], bins: int = 10) -> list[tuple[float, float, int]]:
    """(mean score, share of positives, count) of each non-empty bin of [0, 1] split into `bins` equal bins."""
    s = np.clip(np.asarray(scores, dtype=float), 0.0, 1.0)
    y = np.asarray(labels, dtype=float)
    which = np.minimum((s * bins).astype(int), bins - 1)
    return [(float(s[which == b].mean()), float(y[which == b].mean()), int((which == b).sum()))
            for b in range(bins) if (which == b).any()]


def contextual(p: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Each row of option probabilities `p` divided by the content-free ones `floor` and renormalised: the
    correction of "Calibrate Before Use" (Zhao et al., 2021) with the empty content as the content-free input."""
    scaled = p / np.maximum(floor, 1e-12)
    return scaled / scaled.sum(axis=-1, keepdims=True)
