"""Model stacks, one file per family; `build_model` picks the stack a config names."""

from __future__ import annotations

import torch

from spinfc.runtime.models.base import Model
from spinfc.runtime.models.gemma3 import Gemma3Model
from spinfc.runtime.models.gemma4 import Gemma4Model
from spinfc.runtime.models.llama import LlamaModel
from spinfc.runtime.models.qwen3 import Qwen3Model
from spinfc.runtime.models.qwen3_5 import Qwen3_5Model
from spinfc.runtime.weights.config import ModelConfig

STACKS: dict[str, type[Model]] = {"llama": LlamaModel, "qwen3": Qwen3Model, "gemma3": Gemma3Model,
                                  "gemma4": Gemma4Model, "qwen3_5": Qwen3_5Model}


def build_model(config: ModelConfig, state_dict: dict[str, torch.Tensor], **options) -> Model:
    """The stack for `config.family`, built from a state dict in Hugging Face naming; `options` go to `Model`
    (ops, name, weights_hash, dtype, device)."""
    return STACKS[config.family](config, state_dict, **options)


__all__ = ["Gemma3Model", "Gemma4Model", "LlamaModel", "Model", "Qwen3Model", "Qwen3_5Model", "STACKS", "build_model"]
