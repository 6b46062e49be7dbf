"""A small random-weight Qwen3.5 (the published 27B's ratios of heads and dims, 4 layers: three Gated DeltaNet
layers to one full-attention layer), dense or with Qwen3.5-MoE's sparse blocks (the 35B-A3B's 256 experts, 8 chosen,
scaled to 8 and 2), saved by transformers as a snapshot: what the Qwen3.5 tests load."""

from __future__ import annotations

import torch

# Qwen3.5-27B: 24 heads of 256 (4 kv heads), 16 linear key heads and 48 value heads of 128, partial rotary 0.25,
# conv kernel 4, a full-attention layer every 4. Here the same ratios, scaled down.
SHAPE = dict(
    vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=6,
    num_key_value_heads=1, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
    linear_value_head_dim=8, linear_conv_kernel_dim=4, max_position_embeddings=256,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
)

# Qwen3.5-35B-A3B: 256 experts of width 512, 8 chosen per token, a shared expert of 512; here 8 of 32, 2 chosen.
MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)


def random_qwen3_5(directory, vocab_size: int = 96, seed: int = 0, moe: bool = False, **overrides):
    """transformers' Qwen3_5ForCausalLM (Qwen3_5MoeForCausalLM with `moe`) on random weights (norms, A_log,
    dt_bias and the experts randomized too), saved in `directory`; returns it (eval mode, eager attention)."""
    import transformers

    torch.manual_seed(seed)
    kind = "Qwen3_5Moe" if moe else "Qwen3_5"
    shape = {**SHAPE, **(MOE if moe else {}), "vocab_size": vocab_size, **overrides}
    config = getattr(transformers, f"{kind}TextConfig")(**shape, tie_word_embeddings=False)
    config._attn_implementation = "eager"
    model = getattr(transformers, f"{kind}ForCausalLM")(config).eval()
    with torch.no_grad():
        randomize(model.named_parameters())
    model.save_pretrained(directory)
    return model


def randomize(named_parameters) -> None:
    """Draw the parameters transformers leaves constant or empty in a Qwen3.5 text stack (norms, dt_bias, the
    experts and their router), so that a parity test exercises them; call under `torch.no_grad()`."""
    for name, parameter in named_parameters:
        if "norm" in name:
            parameter.normal_(0.0, 0.3)
        elif name.endswith("dt_bias"):
            parameter.normal_(0.0, 1.0)
        elif "experts" in name or name.endswith("mlp.gate.weight"):  # created empty / zero by transformers
            parameter.normal_(0.0, 0.2)
