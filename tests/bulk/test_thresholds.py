"""Threshold choice on random scores against a brute force over every cut, reliability bins, the CBU correction."""

import random

import numpy as np
import pytest

from spinfc.calibrate.thresholds import choose, contextual, pr_curve, reliability


def brute(scores, labels, cut):
    flagged = [y for s, y in zip(scores, labels) if s >= cut]
    tp = sum(flagged)
    return (tp / len(flagged) if flagged else 0.0), tp / sum(labels)


def test_the_curve_and_each_target_match_a_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randrange(20, 200)
    labels = [rng.random() < 0.3 for _ in range(n)]
    labels[0], labels[1] = True, False
    scores = [round(rng.random() * 0.6 + 0.4 * y * rng.random(), 2) for y in labels]  # ties on purpose
    curve = pr_curve(scores, labels)
    for t, p, r in zip(curve.thresholds, curve.precision, curve.recall):
        assert (p, r) == pytest.approx(brute(scores, labels, t))
    cuts = sorted(set(scores), reverse=True)
    f1 = {c: (lambda p, r: 2 * p * r / (p + r) if p + r else 0)(*brute(scores, labels, c)) for c in cuts}
    best = choose(curve, "f1")
    assert best.f1 == pytest.approx(max(f1.values())) and best.threshold == max(c for c in cuts if
                                                                                f1[c] == pytest.approx(best.f1))
    for goal in (0.5, 0.8):
        chosen = choose(curve, f"recall={goal}")
        assert chosen.recall >= goal and chosen.threshold == max(c for c in cuts if brute(scores, labels, c)[1] >= goal)
        chosen = choose(curve, f"precision={goal}")
        ok = [c for c in cuts if brute(scores, labels, c)[0] >= goal]
        assert chosen.met == bool(ok)
        if ok:
            assert chosen.threshold == min(ok) and chosen.precision >= goal
    assert best.support == sum(labels) and best.rows == n


def test_reliability_bins_count_every_row(seed):
    rng = np.random.default_rng(seed)
    scores, labels = rng.random(300), rng.random(300) < 0.5
    bins = reliability(scores, labels, bins=10)
    assert sum(n for *_, n in bins) == 300 and all(0 <= m <= 1 and 0 <= y <= 1 for m, y, _ in bins)
    assert [m for m, *_ in bins] == sorted(m for m, *_ in bins)


def test_contextual_correction_divides_by_the_content_free_prior():
    p = np.array([[0.8, 0.2], [0.6, 0.4]])
    floor = np.array([[0.8, 0.2], [0.8, 0.2]])
    out = contextual(p, floor)
    assert out[0] == pytest.approx([0.5, 0.5])  # exactly the prior: no evidence either way
    assert out[1, 0] == pytest.approx((0.6 / 0.8) / (0.6 / 0.8 + 0.4 / 0.2)) and out.sum(axis=1) == pytest.approx(1)
