"""Small random-weight decision models (transformers' `*ForSequenceClassification` of each family spinfc serves, 255
labels), saved by transformers with a real tokenizer (SmolLM2's, packaged) as a snapshot: what the decision-model
tests load and serve."""

from __future__ import annotations

import torch

CODES = 255
SHAPE = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=512)
FAMILIES = ("llama", "qwen3", "gemma3", "qwen3_5", "gemma3-vision", "qwen3_5-vision")  # -vision: with its tower
TOWER = dict(hidden_size=32, intermediate_size=32, num_attention_heads=2, num_hidden_layers=1, image_size=28,
             patch_size=14)


def labels(count: int = CODES) -> dict[int, str]:
    """Distinct code names of mixed lengths, as a decision model's id2label might hold."""
    return {i: (f"code_{i:03d}" if i % 3 else f"L{i}") for i in range(count)}


def _config(family: str, vocab: int, count: int):
    import transformers

    common = dict(num_labels=count, id2label=labels(count), label2id={v: k for k, v in labels(count).items()},
                  pad_token_id=None)
    if family.startswith("qwen3_5"):
        from tests.runtime.qwen3_5_random import SHAPE as QWEN3_5

        text = {**QWEN3_5, "vocab_size": vocab}
        if family == "qwen3_5":
            return transformers.Qwen3_5TextConfig(**text, **common)
        text["rope_parameters"] = {**text["rope_parameters"], "mrope_section": [1, 1, 0]}  # a head's 2 frequencies
        tower = dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=text["hidden_size"])
        return transformers.Qwen3_5Config(text_config=text, vision_config=tower, **common)
    shape = {**SHAPE, "vocab_size": vocab}
    if family.startswith("gemma3"):  # a window of 6 positions, so a question's reads cross it
        text = dict(**shape, sliding_window=6, query_pre_attn_scalar=24,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"])
        if family == "gemma3":
            return transformers.Gemma3TextConfig(**text, **common)
        return transformers.Gemma3Config(text_config=text, vision_config=TOWER, **common)
    kind = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config}[family]
    return kind(**shape, **common)


def random_decider(family: str, directory, count: int = CODES, seed: int = 0, tokenizer_dir=None):
    """transformers' sequence-classification model of `family` on random weights (norms drawn too, the head scaled
    so its softmax is far from uniform), saved in `directory` with SmolLM2's tokenizer (the packaged one, or the
    folder `tokenizer_dir`: a device has no packaged model); returns it (eval, eager)."""
    import transformers

    from spinfc.registry import load_tokenizer

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)) if tokenizer_dir else \
        load_tokenizer("smollm2-135m")
    torch.manual_seed(seed)
    config = _config(family, len(tokenizer), count)
    config._attn_implementation = "eager"
    cls = {"llama": transformers.LlamaForSequenceClassification, "qwen3": transformers.Qwen3ForSequenceClassification,
           "gemma3": transformers.Gemma3TextForSequenceClassification,
           "qwen3_5": transformers.Qwen3_5TextForSequenceClassification,
           "gemma3-vision": transformers.Gemma3ForSequenceClassification,
           "qwen3_5-vision": transformers.Qwen3_5ForSequenceClassification}[family]
    model = cls(config).eval()
    with torch.no_grad():
        if family.startswith("qwen3_5"):
            from tests.runtime.qwen3_5_random import randomize

            randomize(model.named_parameters())
        for name, parameter in model.named_parameters():
            if "norm" in name and not family.startswith("qwen3_5"):
                parameter.normal_(0.0, 0.3)
        model.score.weight.normal_(0.0, 0.5)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model
