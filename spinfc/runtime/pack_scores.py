"""A pack's answers -> its category scores and its decision. Pure Python; used by the server and by clients.

`p` maps each question, as (query id, placeholder values), to the probability of each of its options:

    {("threat", ()): {" yes": 0.82, " no": 0.18},
     ("hate_target", (("target", "religion"),)): {" yes": 0.10, " no": 0.90}, ...}

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
from typing import Mapping

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


def category_terms(pack: Pack, category: Category, p: Answers) -> list[tuple[float, float]]:
    """The (p, weight) of every question combination each member of `category` counts."""
    by_key = {(qid, tuple(sorted(values))): probs for (qid, values), probs in p.items()}
    terms = []
    for member in category.members:
        query = pack.query(member.question)
        for combo in combinations(query, member.values):
            probs = by_key.get((member.question, tuple(sorted(combo))))
            if probs is None or member.option not in probs:
                shown = ", ".join(f"{k}={v!r}" for k, v in combo) or "no placeholders"
                raise KeyError(
                    f"category {category.id!r} needs p({member.option!r}) of question {member.question!r} "
                    f"({shown}), which the answers do not hold: score every question of pack {pack.id!r}"
                )
            terms.append((float(probs[member.option]), member.weight))
    return terms


def decide(decision: Decision, scores: Mapping[str, float]) -> tuple[str, int | None, str]:
    """(label, index of the rule that fired or None, why)."""
    for index, rule in enumerate(decision.rules):
        held = [c for c in rule.conditions if c.holds(scores[c.category])]
        if (held and rule.match == "any") or (len(held) == len(rule.conditions) and rule.match == "all"):
            why = ", ".join(f"{c.category} {scores[c.category]:.3f} {c.op} {c.threshold:g}" for c in held)
            return rule.label, index, f"rule {index} ({rule.label}): {why}"
    return decision.default, None, "default: no rule fired"


def score_pack(pack: Pack, p: Answers) -> PackScores:
    """Category scores from the option probabilities `p`, and the decision they lead to.

    Raises KeyError naming the question when `p` lacks a probability a category needs."""
    scores = {c.id: combine(c.combine, category_terms(pack, c, p)) for c in pack.categories}
    if pack.decision is None:
        return PackScores(pack.id, tuple(scores.items()), None, None, "the pack has no decision")
    label, rule, reason = decide(pack.decision, scores)
    return PackScores(pack.id, tuple(scores.items()), label, rule, reason)
