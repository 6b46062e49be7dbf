"""Random-weight models, one place for every study (throughput does not depend on the weights' values):

    snapshot(shape, DIR, ...)   a transformers snapshot at a published shape's widths (`SHAPES`; fewer layers when
                                asked), random weights written on the device, with a real tokenizer: what a served
                                study hands `spinfc serve DIR`
    tokenizer_folder(name, DIR) a packaged model's tokenizer saved as a folder (a snapshot's tokenizer files)
    random_state_dict(config)   float32 weights in Hugging Face naming for a `ModelConfig` (LLAMA3_8B, TINY,
                                SMALL_CONFIGS), scaled so activations stay O(1): what a kernel or stack study builds
                                in memory with `spinfc.runtime.models.build_model`
"""

from __future__ import annotations

from pathlib import Path

import torch

from spinfc.runtime.weights.config import ModelConfig

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


def random_state_dict(config: ModelConfig, device, seed: int) -> dict[str, torch.Tensor]:
    """float32 weights in Hugging Face naming, scaled so activations stay O(1) and the next-token distributions
    are far from uniform (so a parity check compares something)."""
    g = torch.Generator(device=device).manual_seed(seed)
    c = config
    gemma = c.family == "gemma3"

    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=g, device=device) * std

    def norm(n):  # Gemma multiplies by (1 + w)
        return normal(n, std=0.1) + (0.0 if gemma else 1.0)

    # Gemma scales embeddings by sqrt(hidden) and ties them to its LM head: a smaller std keeps each token from
    # predicting itself with a logit of sqrt(hidden).
    state = {"model.embed_tokens.weight": normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5 if gemma else 1.0),
             "model.norm.weight": norm(c.hidden)}
    if not c.tie_embeddings:
        state["lm_head.weight"] = normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5)  # logits ~ N(0, 1/4)
    shapes = {"q_proj": (c.heads * c.head_dim, c.hidden), "k_proj": (c.kv_heads * c.head_dim, c.hidden),
              "v_proj": (c.kv_heads * c.head_dim, c.hidden), "o_proj": (c.hidden, c.heads * c.head_dim)}
    mlp = {"gate_proj": (c.intermediate, c.hidden), "up_proj": (c.intermediate, c.hidden),
           "down_proj": (c.hidden, c.intermediate)}
    for i in range(c.layers):
        p = f"model.layers.{i}."
        # The blocks' output projections are scaled down, so each layer adds a small update to the residual
        # stream, as in a trained model (at full scale, bf16 noise alone grows past a useful tolerance).
        for name, (n_out, n_in) in shapes.items():
            std = n_in**-0.5 * (0.2 if name == "o_proj" else 1.0)
            state[p + f"self_attn.{name}.weight"] = normal(n_out, n_in, std=std)
        for name, (n_out, n_in) in mlp.items():
            std = n_in**-0.5 * (0.2 if name == "down_proj" else 1.0)
            state[p + f"mlp.{name}.weight"] = normal(n_out, n_in, std=std)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for name in norms:
            state[p + f"{name}.weight"] = norm(c.hidden)
        if gemma:  # Gemma norms each block's output before adding it: scale those norms down instead
            for name in ("post_attention_layernorm", "post_feedforward_layernorm"):
                state[p + f"{name}.weight"] = normal(c.hidden, std=0.02) - 0.8
        if c.family in ("qwen3", "gemma3"):
            state[p + "self_attn.q_norm.weight"] = norm(c.head_dim)
            state[p + "self_attn.k_norm.weight"] = norm(c.head_dim)
    return state


SMALL_CONFIGS = {
    # head dim 128 (Llama 3's), GQA 4:2
    "llama": ModelConfig(family="llama", hidden=512, layers=4, heads=4, kv_heads=2, head_dim=128, intermediate=1024,
                         vocab=8192, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False),
    # head dim 64, q/k norms
    "qwen3": ModelConfig(family="qwen3", hidden=256, layers=3, heads=4, kv_heads=2, head_dim=64, intermediate=768,
                         vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=False),
    # head dim 256, one kv head, sliding-window layers (window 48 positions), GELU-tanh, (1 + w) norms
    "gemma3": ModelConfig(family="gemma3", hidden=384, layers=4, heads=4, kv_heads=1, head_dim=256,
                          intermediate=1024, vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=True,
                          rope_local_theta=10000.0, sliding_window=48, sliding_layers=(True, True, False, True),
                          query_pre_attn_scalar=256.0),
}

LLAMA3_8B = ModelConfig(family="llama", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                        intermediate=14336, vocab=128256, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)


def non_embedding_params(c: ModelConfig) -> int:
    """Parameters that every token multiplies through (the embedding lookup and the LM head excluded)."""
    per_layer = c.hidden * (c.heads + 2 * c.kv_heads) * c.head_dim + c.heads * c.head_dim * c.hidden
    per_layer += 3 * c.hidden * c.intermediate + 2 * c.hidden
    return c.layers * per_layer + c.hidden


# gpu.py's --smoke model: the 8B's family at widths the Triton interpreter runs in seconds
TINY = ModelConfig(family="llama", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32, intermediate=256,
                   vocab=512, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)
