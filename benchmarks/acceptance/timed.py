"""One large shape per family, served at defaults and timed over HTTP beside its floor.

Each shape keeps the published model's widths with fewer layers (the floor scales with them, so the fraction of
the floor is the full model's, give or take its per-layer costs); random bf16 weights written by transformers on
the device, SmolLM2's tokenizer (`--tokenizer`: a real vocabulary, so the seed-shaped job has its token counts).
The job is the seed's (benchmarks/job.py: 24 contents of ~470 tokens, 56 yes/no questions of ~20 tokens), sent as
one /v1/score request after one untimed request; questions/s is the best of three. The floor is
2 x non-embedding parameters x the tokens the request put into passes (`usage.input_tokens`) at the card's bf16
rate (786 TFLOP/s, BENCHMARKS.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import torch

BF16_FLOPS = 786e12
S, F = "sliding_attention", "full_attention"


def _every(layers: int, full_every: int, sliding: str, full: str) -> list[str]:
    return [full if (i + 1) % full_every == 0 else sliding for i in range(layers)]


def shapes(layers: int) -> dict[str, tuple[str, dict]]:
    """family -> (transformers' CausalLM class, its config) at the published widths with `layers` layers."""
    return {
        "llama-3-8b": ("Llama", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                     num_key_value_heads=8, head_dim=128, rope_theta=500000.0)),
        "qwen3-8b": ("Qwen3", dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                                   num_key_value_heads=8, head_dim=128)),
        "gemma3-27b": ("Gemma3", dict(hidden_size=5376, intermediate_size=21504, num_attention_heads=32,
                                      num_key_value_heads=16, head_dim=128, query_pre_attn_scalar=168,
                                      sliding_window=1024, layer_types=_every(layers, 6, S, F))),
        "gemma4-31b": ("Gemma4", dict(hidden_size=5376, intermediate_size=21504, num_attention_heads=32,
                                      num_key_value_heads=16, head_dim=256, global_head_dim=512,
                                      num_global_key_value_heads=4, attention_k_eq_v=True, sliding_window=1024,
                                      final_logit_softcapping=30.0, hidden_size_per_layer_input=0,
                                      layer_types=_every(layers, 6, S, F))),
        "qwen3_5-27b": ("Qwen3_5", dict(hidden_size=5120, intermediate_size=17408, num_attention_heads=24,
                                        num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
                                        linear_num_value_heads=48, linear_key_head_dim=128,
                                        linear_value_head_dim=128)),
    }


TINY = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=16)


def build(name: str, directory: Path, tokenizer_dir: Path, layers: int, tiny: bool, device: str) -> int:
    """Write the shape's snapshot (bf16 on CUDA) with the tokenizer; return its non-embedding parameter count."""
    import transformers

    kind, widths = shapes(layers)[name]
    if tiny:
        widths = {**widths, **TINY, **({"linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                        "linear_key_head_dim": 16, "linear_value_head_dim": 16}
                                       if kind == "Qwen3_5" else {}),
                  **({"global_head_dim": 32, "num_global_key_value_heads": 1} if kind == "Gemma4" else {})}
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config_class = getattr(transformers, f"{kind}TextConfig" if kind.startswith(("Gemma", "Qwen3_5")) else
                           f"{kind}Config")
    config = config_class(**widths, num_hidden_layers=layers, vocab_size=len(tokenizer),
                          max_position_embeddings=8192, tie_word_embeddings=False)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)


def time_job(url: str, tokenizer_dir: Path, contents: int, questions: int, content_tokens: int) -> dict:
    """The seed-shaped job over HTTP: one untimed request, then the best of three."""
    import transformers

    from benchmarks.job import content, request_body

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    body = request_body([content(i, tokenizer, content_tokens) for i in range(contents)])
    body["scoring"]["queries"] = body["scoring"]["queries"][:questions]
    first = httpx.post(url + "/v1/score", json=body, timeout=600)
    first.raise_for_status()
    seconds = []
    for _ in range(3):
        began = time.perf_counter()
        answer = httpx.post(url + "/v1/score", json=body, timeout=600)
        seconds.append(time.perf_counter() - began)
        answer.raise_for_status()
    tokens = answer.json()["usage"]["input_tokens"]
    return {"seconds": min(seconds), "questions": contents * questions, "tokens": tokens,
            "questions_per_s": contents * questions / min(seconds)}


def with_floor(timing: dict, params: int, layers: int) -> dict:
    floor_seconds = 2 * params * timing["tokens"] / BF16_FLOPS
    return {**timing, "layers": layers, "non_embedding_params": params,
            "floor_questions_per_s": timing["questions"] / floor_seconds,
            "of_floor": floor_seconds / timing["seconds"]}


def table(rows: list[dict]) -> str:
    lines = ["| shape | layers | ready s | questions/s | floor q/s | of the floor | tokens/job |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['shape']} | - | - | {r['error'][:80]} | - | - | - |")
            continue
        lines.append(f"| {r['shape']} | {r['layers']} | {r['ready_after']:.0f} | {r['questions_per_s']:,.0f} | "
                     f"{r['floor_questions_per_s']:,.0f} | {r['of_floor']:.2f} | {r['tokens']:,} |")
    return "\n".join(lines)


def dump(rows: list[dict]) -> str:
    return json.dumps(rows, indent=1)
