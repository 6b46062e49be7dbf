"""Mistral: Llama's layer, every layer attending within the last `sliding_window` positions where config.json sets
one (Mistral 7B v0.1: 4096; null in later checkpoints: the whole sequence). A Llama-shaped family is this much: a
config, a stack, a reader and its `FAMILY`, plus its line in `runtime/models/families.py`."""

from __future__ import annotations

from typing import Any

import attrs

from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.llama import LlamaModel, llama_fields
from spinfc.runtime.weights.config import ModelConfig, rope_theta


@attrs.frozen(kw_only=True)
class MistralConfig(ModelConfig):
    sliding_window: int | None = None  # in positions; None: every layer sees the whole sequence

    def window(self, layer: int) -> int | None:
        return self.sliding_window


class MistralModel(LlamaModel):
    family = "mistral"


def read_config(hf: dict[str, Any]) -> MistralConfig:
    return MistralConfig(rope_theta=rope_theta(hf), sliding_window=hf.get("sliding_window"),
                         **llama_fields(hf, "mistral"))


FAMILY = FamilySpec(read_config=read_config, stack=MistralModel, config=MistralConfig)
