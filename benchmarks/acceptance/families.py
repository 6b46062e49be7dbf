"""The families the acceptance run serves: a small random-weight snapshot of each (real architecture; on CUDA the
published head widths, which is where kernels break), what media each reads, and how to build it.

Each builder writes a transformers snapshot with a byte-level tokenizer (tests/media/snapshots.py: ids 0-255 are the
bytes, then the family's special tokens), so a text's tokens are its bytes' and a reference needs no tokenizer
merges; it returns transformers' model (float32, eval) for the reference logprobs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import torch


@attrs.frozen
class Family:
    name: str
    build: Callable[[Path, bool], object]  # (directory, gpu widths) -> transformers' model, snapshot written
    media: tuple[str, ...] = ()  # kinds of part it reads: "image", "audio", "video"


def _text(config_class: str, model_class: str, tiny: dict, gpu: dict) -> Callable:
    def build(directory: Path, gpu_widths: bool):
        import transformers

        from tests.media.snapshots import byte_tokenizer

        directory.mkdir(parents=True, exist_ok=True)
        tokenizer = byte_tokenizer(directory)
        ids = {name: tokenizer.convert_tokens_to_ids(name) for name in ("<pad>", "<bos>", "<eos>")}
        config = getattr(transformers, config_class)(
            **(gpu if gpu_widths else tiny), vocab_size=len(tokenizer), pad_token_id=ids["<pad>"],
            bos_token_id=ids["<bos>"], eos_token_id=ids["<eos>"], max_position_embeddings=4096)
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(config).eval()
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "norm" in name:
                    parameter.normal_(1.0, 0.3)
        model.save_pretrained(directory)
        return model
    return build


_SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16)
# the 8B shapes' heads (32 of 128 over 8 kv heads), narrow and shallow
_WIDE = dict(hidden_size=1024, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=32,
             num_key_value_heads=8, head_dim=128)

llama = _text("LlamaConfig", "LlamaForCausalLM", _SMALL, _WIDE)
qwen3 = _text("Qwen3Config", "Qwen3ForCausalLM", _SMALL, _WIDE)
# every layer windowed, narrower than a content, so that contents, questions and decodes cross the window
mistral = _text("MistralConfig", "MistralForCausalLM", {**_SMALL, "sliding_window": 48},
                {**_WIDE, "sliding_window": 48})


def gemma3(directory: Path, gpu_widths: bool):
    from tests.media.snapshots import gemma3_snapshot

    return gemma3_snapshot(directory)[0]


def gemma4(variant: str) -> Callable:
    def build(directory: Path, gpu_widths: bool):
        from tests.media.snapshots import gemma4_snapshot

        return gemma4_snapshot(directory, variant)[0]
    return build


# Qwen3.5-27B's heads: 24 of 256 over 4 kv heads; linear attention 16 key heads and 48 value heads of 128. The
# extraction warm-up's illegal memory access of 2026-12-04 needed these widths (fla's fused step read `beta` as
# per-key decays of [n, 1, Hv, Dk]).
_QWEN3_5_WIDE = dict(hidden_size=1024, intermediate_size=2048, num_attention_heads=24, num_key_value_heads=4,
                     head_dim=256, linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128,
                     linear_value_head_dim=128,
                     rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                                      "mrope_section": [11, 11, 10], "mrope_interleaved": True})


def qwen3_5(moe: bool) -> Callable:
    def build(directory: Path, gpu_widths: bool):
        from tests.media.snapshots import qwen3_5_snapshot

        return qwen3_5_snapshot(directory, moe=moe, text=_QWEN3_5_WIDE if gpu_widths else {})[0]
    return build


FAMILIES = (
    Family("llama", llama),
    Family("qwen3", qwen3),
    Family("mistral", mistral),
    Family("gemma3", gemma3, ("image",)),
    Family("gemma4-e2b", gemma4("gemma4-e2b"), ("image", "audio", "video")),
    Family("gemma4-31b", gemma4("gemma4-31b"), ("image",)),
    Family("gemma4-26b-a4b", gemma4("gemma4-26b-a4b"), ("image",)),
    Family("qwen3_5", qwen3_5(False), ("image", "video")),
    Family("qwen3_5-moe", qwen3_5(True), ("image", "video")),
)
BY_NAME = {family.name: family for family in FAMILIES}
