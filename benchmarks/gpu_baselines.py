"""The baselines `benchmarks/gpu.py` runs next to spinfc's packed Triton path:

  - Hugging Face transformers, one sequence per question (content + question), the questions of a content
    batched together, logits only at the last position;
  - transformers with the content's KV cache computed once and reused by all its questions (the cache expanded
    to the questions' batch): what a prefix cache buys;
  - spinfc's packed passes with PyTorch's FlexAttention (compiled, `mask_mod` from `ends[]`) in place of the
    Triton tree attention: the stock-PyTorch way to run the same tree mask.
"""

from __future__ import annotations

import contextlib
import types

import torch

from spinfc.backend import triton_ops
from spinfc.runtime.weights.config import ModelConfig


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def hf_llama(config: ModelConfig, device: str = "cuda", dtype: torch.dtype = torch.bfloat16):
    """A transformers LlamaForCausalLM of `config`'s shape with random weights (transformers' own init) in
    `dtype`, built on the device, SDPA attention. Its state dict is in the naming spinfc's stacks read."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        hidden_size=config.hidden, intermediate_size=config.intermediate, num_hidden_layers=config.layers,
        num_attention_heads=config.heads, num_key_value_heads=config.kv_heads, head_dim=config.head_dim,
        vocab_size=config.vocab, rope_theta=config.rope_theta, rms_norm_eps=config.norm_eps,
        tie_word_embeddings=config.tie_embeddings, max_position_embeddings=8192,
    )
    hf_config._attn_implementation = "sdpa"
    with default_dtype(dtype), torch.device(device):
        model = LlamaForCausalLM(hf_config)
    return model.eval()


def option_logprobs(logits: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
    """logits: [B, 1, V] at each sequence's last token, options: [O] token ids -> [B, O] float32 logprobs."""
    return torch.log_softmax(logits[:, -1].float(), dim=-1)[:, options]


@torch.inference_mode()
def hf_one_per_question(model, content: torch.Tensor, questions: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
    """content: [L], questions: [Q, S], options: [O] -> [Q, O]: each question its own sequence (content +
    question), the Q sequences of one content in one batch."""
    batch = torch.cat([content[None].expand(questions.shape[0], -1), questions], dim=1)  # [Q, L + S]
    return option_logprobs(model(batch, use_cache=False, logits_to_keep=1).logits, options)


@torch.inference_mode()
def hf_kv_reuse(model, content: torch.Tensor, questions: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
    """The content's KV cache computed once (batch 1), expanded to the Q questions, which run as one batch."""
    Q, S = questions.shape
    L = content.shape[0]
    cache = model(content[None], use_cache=True, logits_to_keep=1).past_key_values
    cache.batch_repeat_interleave(Q)
    positions = torch.arange(L, L + S, device=content.device)[None].expand(Q, S)
    mask = torch.ones(Q, L + S, dtype=torch.long, device=content.device)
    out = model(questions, past_key_values=cache, position_ids=positions, attention_mask=mask, logits_to_keep=1)
    return option_logprobs(out.logits, options)


class FlexTreeAttention:
    """`tree_attention` through FlexAttention: the block mask is built from `ends` (and positions, for a window)
    once per pass (the model passes the same tensors to every layer) and reused by every layer."""

    def __init__(self, block: int = 128, compile: bool = True):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.create_block_mask, self.block = create_block_mask, block
        self.flex = torch.compile(flex_attention, dynamic=False) if compile else flex_attention
        self._key = None
        self._mask = None

    def block_mask(self, ends: torch.Tensor, positions: torch.Tensor, window: int | None):
        key = (id(ends), ends._version, id(positions), positions._version, window)
        if key != self._key:  # (the tensors themselves are held in the mask_mod, so their ids stay theirs)
            def mask_mod(b, h, q_idx, kv_idx):
                seen = (kv_idx <= q_idx) & (q_idx < ends[kv_idx])
                if window is not None:
                    seen = seen & (positions[q_idx] - positions[kv_idx] < window)
                return seen

            T = ends.shape[0]
            self._mask = self.create_block_mask(mask_mod, None, None, T, T, device=ends.device,
                                                BLOCK_SIZE=self.block)
            self._key = key
        return self._mask

    def __call__(self, q, k, v, ends, positions, spans, *, scale, window, quant=None):
        """q: [T, H, D], k, v: [T, Hk, D] -> [T, H, D], as `reference.tree_attention` (with `quant`, quantized for
        the output projection)."""
        mask = self.block_mask(ends, positions, window)
        as_heads = lambda t: t.transpose(0, 1)[None]  # noqa: E731  [1, H, T, D]
        out = self.flex(as_heads(q), as_heads(k), as_heads(v), block_mask=mask, scale=scale,
                        enable_gqa=k.shape[1] != q.shape[1])
        out = out[0].transpose(0, 1)  # [T, H, D]
        return quant.reference(out) if quant is not None else out


def flex_ops(attention: FlexTreeAttention) -> types.SimpleNamespace:
    """The Triton ops with FlexAttention in place of the tree attention kernel."""
    names = ["rms_norm", "add_rms_norm", "apply_rope", "gated_act", "answer_logprobs"]
    return types.SimpleNamespace(**{name: getattr(triton_ops, name) for name in names}, tree_attention=attention)
