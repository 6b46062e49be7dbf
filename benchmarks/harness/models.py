"""Random-weight models, one place for every study (throughput does not depend on the weights' values):

    snapshot(shape, DIR, ...)   a transformers snapshot at a published shape's widths (`SHAPES`; fewer layers when
                                asked), random weights written on the device, with a real tokenizer: what a served
                                study hands `spinfc serve DIR`
    tokenizer_folder(name, DIR) a packaged model's tokenizer saved as a folder (a snapshot's tokenizer files)
    config_folder(DIR, hf, tok) a tokenizer and a config.json without weights: the name a server or engine is given
                                when a loader makes the weights (harness/stacks.py)

A stack built in memory (no files: a kernel study, or a shape too large to write) is harness/stacks.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

S, F = "sliding_attention", "full_attention"


def _every(layers: int, full_every: int) -> list[str]:
    return [F if (i + 1) % full_every == 0 else S for i in range(layers)]


def shapes(layers: int) -> dict[str, tuple[str, dict]]:
    """shape -> (transformers' class prefix, its config) at the published widths with `layers` layers."""
    return {
        "llama-3-8b": ("Llama", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                     num_key_value_heads=8, head_dim=128, rope_theta=500000.0)),
        "qwen3-8b": ("Qwen3", dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                                   num_key_value_heads=8, head_dim=128)),
        "gemma3-27b": ("Gemma3", dict(hidden_size=5376, intermediate_size=21504, num_attention_heads=32,
                                      num_key_value_heads=16, head_dim=128, query_pre_attn_scalar=168,
                                      sliding_window=1024, layer_types=_every(layers, 6))),
        "gemma4-31b": ("Gemma4", dict(hidden_size=5376, intermediate_size=21504, num_attention_heads=32,
                                      num_key_value_heads=16, head_dim=256, global_head_dim=512,
                                      num_global_key_value_heads=4, attention_k_eq_v=True, sliding_window=1024,
                                      final_logit_softcapping=30.0, hidden_size_per_layer_input=0,
                                      layer_types=_every(layers, 6))),
        "qwen3_5-27b": ("Qwen3_5", dict(hidden_size=5120, intermediate_size=17408, num_attention_heads=24,
                                        num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
                                        linear_num_value_heads=48, linear_key_head_dim=128,
                                        linear_value_head_dim=128)),
    }


SHAPES = tuple(shapes(1))
PUBLISHED_LAYERS = {"llama-3-8b": 32, "qwen3-8b": 36, "gemma3-27b": 62, "gemma4-31b": 60, "qwen3_5-27b": 64}
# the widths of a shape's tiny twin (`tiny=True`): the same code on the CPU in seconds
TINY_WIDTHS = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=16)


def snapshot(shape: str, directory: Path, tokenizer_dir: Path, layers: int | None = None, tiny: bool = False,
             device: str = "cpu", seed: int = 0) -> int:
    """Write `shape`'s snapshot into `directory` (bf16 on CUDA, float32 elsewhere; transformers' initialisation
    under `seed`, so every process and checkout gets the same weights) with the tokenizer of `tokenizer_dir`;
    return its non-embedding parameter count (what the floor multiplies). `layers` defaults to the published
    model's; `tiny` keeps the architecture at TINY_WIDTHS."""
    import transformers

    layers = layers or PUBLISHED_LAYERS[shape]
    kind, widths = shapes(layers)[shape]
    if tiny:
        widths = {**widths, **TINY_WIDTHS, **({"linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                               "linear_key_head_dim": 16, "linear_value_head_dim": 16}
                                              if kind == "Qwen3_5" else {}),
                  **({"global_head_dim": 32, "num_global_key_value_heads": 1} if kind == "Gemma4" else {})}
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config_class = getattr(transformers, f"{kind}TextConfig" if kind.startswith(("Gemma", "Qwen3_5")) else
                           f"{kind}Config")
    config = config_class(**widths, num_hidden_layers=layers, vocab_size=len(tokenizer),
                          max_position_embeddings=8192, tie_word_embeddings=False)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return params


def tokenizer_folder(name: str, folder: Path) -> Path:
    """The packaged model `name`'s tokenizer (spinfc.registry), saved into `folder`."""
    from spinfc.registry import load_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    load_tokenizer(name).save_pretrained(str(folder))
    return folder


def config_folder(folder: Path, hf: dict, tokenizer: str | Path) -> Path:
    """`folder` holding `tokenizer` (a packaged model's name, or a folder of tokenizer files) and `hf` as its
    config.json, no weights: a loader makes them, and the name resolves and tokenizes as a snapshot would."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    if Path(tokenizer).is_dir():
        for file in Path(tokenizer).iterdir():
            shutil.copy(file, folder / file.name)
    else:
        tokenizer_folder(str(tokenizer), folder)
    (folder / "config.json").write_text(json.dumps(hf))
    return folder
