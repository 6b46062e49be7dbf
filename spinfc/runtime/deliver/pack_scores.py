"""A pack's answers -> its category scores and its decision. Pure Python; used by the server and by clients.

`p` maps each question, as (query id, placeholder values), to the probability of each of its options:

    {("threat", ()): {" yes": 0.82, " no": 0.18},
     ("hate_target", (("target", "religion"),)): {" yes": 0.10, " no": 0.90}, ...}

`floor` is the same mapping for the empty content (the response's floor_p). A category with baseline = "floor"
counts each member's lift over the floor instead of p: max(0, (p - floor_p) / (1 - floor_p)), the share of the
room above the model's prior that the content filled.

A category combines its members' terms, each term a probability p_i times its weight w_i (docs/packs.md):

    max            max_i  w_i * p_i
    mean           sum_i w_i * p_i / sum_i w_i
    weighted_sum   sum_i w_i * p_i
    noisy_or       1 - prod_i (1 - w_i * p_i)      (the chance at least one member holds, if they were independent)

The decision's rules are tried in order; the first whose conditions hold (any or all of them) gives the label,
else the decision's default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from attrs import frozen

from spinfc.frontend.pack import Category, Decision, Pack, combinations

Values = tuple[tuple[str, str], ...]
Answers = Mapping[tuple[str, Values], Mapping[str, float]]


@frozen
class PackScores:
    pack: str
    categories: tuple[tuple[str, float], ...]  # (category id, score), in the pack's order
    label: str | None  # the decision; None when the pack has none
    rule: int | None  # index of the rule that fired; None when the default (or no decision) applies
    reason: str  # which conditions held, e.g. "rule 0 (block): violence 0.91 >= 0.85"

    def score(self, category: str) -> float:
        return dict(self.categories)[category]


def combine(kind: str, terms: list[tuple[float, float]]) -> float:
    """Combine (p, weight) terms by `kind`; see the module docstring for the formulas."""
    if not terms:
        raise ValueError("a category needs at least one member")
    if kind == "max":
        return max(w * p for p, w in terms)
    if kind == "mean":
        return sum(w * p for p, w in terms) / sum(w for _, w in terms)
    if kind == "weighted_sum":
        return sum(w * p for p, w in terms)
    if kind == "noisy_or":
        return 1.0 - math.prod(1.0 - w * p for p, w in terms)
    raise ValueError(f"unknown combiner {kind!r}: use max, mean, weighted_sum or noisy_or")


def lift(p: float, floor_p: float) -> float:
    """How much of the room above the floor the content filled: max(0, (p - floor_p) / (1 - floor_p))."""
    return 0.0 if floor_p >= 1.0 else max(0.0, (p - floor_p) / (1.0 - floor_p))


def category_terms(
    pack: Pack, category: Category, p: Answers, floor: Answers | None = None
) -> list[tuple[float, float]]:
    """The (p or lift, weight) of every question combination each member of `category` counts."""
    if category.baseline == "floor" and floor is None:
        raise ValueError(f"category {category.id!r} counts lift over the floor: pass floor= (the floor_p answers)")
    answers = _by_key(p)
    floors = _by_key(floor) if category.baseline == "floor" and floor is not None else None
    terms = []
    for member in category.members:
        for combo in combinations(pack.query(member.question), member.values):
            value = _lookup(answers, pack, category, member.question, member.option, combo, "p")
            if floors is not None:
                value = lift(value, _lookup(floors, pack, category, member.question, member.option, combo, "floor_p"))
            terms.append((value, member.weight))
    return terms


def _by_key(answers: Answers) -> dict:
    return {(qid, tuple(sorted(values))): probs for (qid, values), probs in answers.items()}


def _lookup(answers: dict, pack: Pack, category: Category, question: str, option: str, combo: Values, what: str):
    probs = answers.get((question, tuple(sorted(combo))))
    if probs is None or option not in probs:
        shown = ", ".join(f"{k}={v!r}" for k, v in combo) or "no placeholders"
        raise KeyError(
            f"category {category.id!r} needs {what}({option!r}) of question {question!r} ({shown}), which the "
            f"answers do not hold: score every question of pack {pack.id!r}"
        )
    return float(probs[option])


def decide(decision: Decision, scores: Mapping[str, float]) -> tuple[str, int | None, str]:
    """(label, index of the rule that fired or None, why)."""
    for index, rule in enumerate(decision.rules):
        held = [c for c in rule.conditions if c.holds(scores[c.category])]
        if (held and rule.match == "any") or (len(held) == len(rule.conditions) and rule.match == "all"):
            why = ", ".join(f"{c.category} {scores[c.category]:.3f} {c.op} {c.threshold:g}" for c in held)
            return rule.label, index, f"rule {index} ({rule.label}): {why}"
    return decision.default, None, "default: no rule fired"


def score_pack(pack: Pack, p: Answers, floor: Answers | None = None) -> PackScores:
    """Category scores from the option probabilities `p` (and `floor`, the floor_p answers, which categories
    with baseline = "floor" need), and the decision they lead to.

    Raises KeyError naming the question when `p` or `floor` lacks a probability a category needs, ValueError
    when a category needs `floor` and none is given."""
    scores = {c.id: combine(c.combine, category_terms(pack, c, p, floor)) for c in pack.categories}
    if pack.decision is None:
        return PackScores(pack.id, tuple(scores.items()), None, None, "the pack has no decision")
    label, rule, reason = decide(pack.decision, scores)
    return PackScores(pack.id, tuple(scores.items()), label, rule, reason)
