"""`ModelConfig`: the shape every family's stack has, whichever file it came from, and the readers of a Hugging Face
`config.json` that families share. What only one family has is in that family's own config, a subclass declared in
its folder (`Gemma3Config`: sliding windows; `Gemma4Config`; `Qwen3_5Config`: Gated DeltaNet layers, experts);
`runtime/models/families.py` says which class and which reader each `model_type` gets.

A config names only what the stacks need. Features the stacks do not implement (rope scaling, logit soft-capping,
attention biases, other activations) are refused by the readers with a message, never silently ignored.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from spinfc.runtime.weights.errors import UnsupportedModel  # noqa: F401 (re-exported)


class WeightMismatch(UnsupportedModel):
    """A tensor the stack needs is missing, has the wrong shape, or is one it has no use for: `tensor` is its
    Hugging Face name (the loader names the file that holds it, runtime/weights/folder.py)."""

    def __init__(self, message: str, tensor: str) -> None:
        super().__init__(message)
        self.tensor = tensor


@attrs.frozen
class ModelConfig:
    family: str  # a name in `runtime/models/families.py`'s table
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float  # the rope base of global (full-attention) layers
    norm_eps: float
    tie_embeddings: bool
    # a decision model (weights/decision_head.py): the codes its head reads, its labels in head order; None: the
    # head reads the vocabulary
    codes: tuple[str, ...] | None = None

    def kv_shape(self, layer: int) -> tuple[int, int]:
        """(kv heads, head dim) of a layer's keys and values (a family whose layers differ says so: Gemma 4)."""
        return self.kv_heads, self.head_dim

    @property
    def attention_scale(self) -> float:
        return self.head_dim**-0.5

    def window(self, layer: int) -> int | None:
        """The window (in positions) the layer attends within; None: everything before it (a family whose layers
        attend within a window says so)."""
        return None

    def is_recurrent(self, layer: int) -> bool:
        """Whether the layer keeps a recurrent state rather than keys and values (Qwen3.5's Gated DeltaNet)."""
        return False

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        """The config `to_json` wrote, as this class (`families.config_from_json` picks the family's class); keys
        this class does not have are left out (a copy cached when every family's fields were on one class)."""
        return cls.from_fields(json.loads(text))

    @classmethod
    def from_fields(cls, fields: dict) -> "ModelConfig":
        """The config of a dictionary of its fields (JSON's lists become tuples); a family with nested options
        converts them in its own override."""
        names = {field.name for field in attrs.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items() if k in names})


def rope_theta(hf: dict[str, Any], layer_type: str | None = None, default: float = 10000.0) -> float:
    """The rope base, from transformers 4's `rope_theta` or 5's `rope_parameters` (flat, or per layer type)."""
    params = hf.get("rope_parameters") or {}
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    refuse_rope_scaling(hf.get("rope_scaling"), params)
    if "rope_theta" in params:
        return float(params["rope_theta"])
    key = "rope_local_base_freq" if layer_type == "sliding_attention" else "rope_theta"
    return float(hf.get(key, default))


def refuse_rope_scaling(*settings: dict | None) -> None:
    for setting in settings:
        kind = (setting or {}).get("rope_type", (setting or {}).get("type", "default"))
        if setting and kind != "default":
            raise UnsupportedModel(
                f"rope scaling of type {kind!r} is not implemented by spinfc's model stacks; "
                "use a checkpoint without rope scaling"
            )


def require(hf: dict[str, Any], key: str, allowed: tuple, what: str) -> None:
    if hf.get(key) not in allowed:
        raise UnsupportedModel(f"{what}: config.json has {key}={hf.get(key)!r}; spinfc supports {allowed}")


def shared_fields(hf: dict[str, Any], family: str, tie_default: bool = False) -> dict[str, Any]:
    """The fields every family has but the rope base, from a text config.json's usual keys (a family whose keys
    differ reads its own)."""
    heads = hf["num_attention_heads"]
    return dict(
        family=family,
        hidden=hf["hidden_size"],
        layers=hf["num_hidden_layers"],
        heads=heads,
        kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
        intermediate=hf["intermediate_size"],
        vocab=hf["vocab_size"],
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", tie_default)),
    )
