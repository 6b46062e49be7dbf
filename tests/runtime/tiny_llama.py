"""A llama folder of random weights (seed 0) with SmolLM2's tokenizer, as transformers saves it: the small real
model the engine, memory and model-folder tests load (`config` overrides the widths)."""

from __future__ import annotations

from pathlib import Path

import torch

from spinfc.registry import load_tokenizer

WIDTHS = dict(vocab_size=49152, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, tie_word_embeddings=True)


def tiny_llama(folder: Path, **config) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**{**WIDTHS, **config})).save_pretrained(folder)
    load_tokenizer("smollm2-135m").save_pretrained(folder)
    return folder
