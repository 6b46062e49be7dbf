"""A decision model: a checkpoint whose head reads a fixed set of codes instead of the vocabulary.

transformers writes one as `<Family>ForSequenceClassification` (`architectures` in config.json): the causal stack,
then `score` ([num_labels, hidden], no bias) over the final-normed hidden state, the labels named by `id2label`.
transformers pools at the last non-pad token; spinfc reads the head at a question's answer row (the last token
before its slot), so a question's code distribution is transformers' softmax on the same prefix (content and
question text up to the slot).

    codes_of(hf, ...)   the codes (labels, in head order) of a config.json dictionary, or None for a model that
                        reads its vocabulary; refuses what spinfc cannot read as a code distribution

Which families have a decision head is the family table's to say (`runtime/models/families.py`: `decision_codes`, and
`codes_of_model` for a model name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_CODES = 255  # the seed's readout, and /v1/decisions' largest choice
CODE_HEAD = "score.weight"  # the head's weight in transformers' naming


def is_decision(hf: dict[str, Any]) -> bool:
    return any(str(name).endswith("ForSequenceClassification") for name in hf.get("architectures") or ())


def codes_of(hf: dict[str, Any], refuse: type[Exception], readers: Sequence[str] = (),
             named: str = "") -> tuple[str, ...] | None:
    """The codes of a decision model's config.json (its `id2label` labels by index), None for any other model.
    Raises `refuse` (UnsupportedModel) for a model_type not among `readers` (the families with a decision head,
    `named` in the message), a multi-label or regression
    head (not one distribution over codes), more than MAX_CODES labels, or labels that are not distinct names."""
    if not is_decision(hf):
        return None
    architecture = next(a for a in hf["architectures"] if str(a).endswith("ForSequenceClassification"))
    if hf.get("model_type") not in readers:
        raise refuse(f"{architecture}: spinfc reads the decision head of {named} checkpoints, not model_type "
                     f"{hf.get('model_type')!r}")
    if hf.get("problem_type") not in (None, "single_label_classification"):
        raise refuse(f"{architecture} has problem_type {hf['problem_type']!r}: spinfc reads a head whose codes "
                     "share one softmax (single_label_classification)")
    id2label = hf.get("id2label") or {f"{i}": f"LABEL_{i}" for i in range(int(hf.get("num_labels", 2)))}
    try:
        by_index = {int(key): str(label) for key, label in id2label.items()}
    except ValueError:
        raise refuse(f"{architecture}: id2label's keys must be the head's row indices 0..N-1") from None
    if sorted(by_index) != list(range(len(by_index))):
        raise refuse(f"{architecture}: id2label names rows {sorted(by_index)}, not every row 0..N-1 of the head")
    codes = tuple(by_index[i] for i in range(len(by_index)))
    if not 2 <= len(codes) <= MAX_CODES:
        raise refuse(f"{architecture} has {len(codes)} labels: a decision head reads 2 to {MAX_CODES} codes")
    if any(not code.strip() for code in codes) or len(set(codes)) != len(codes):
        raise refuse(f"{architecture}: its id2label labels must be distinct, non-empty names (they are the codes "
                     "requests ask for); fix id2label in config.json")
    return codes
