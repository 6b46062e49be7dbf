"""`Precision`: which dtype each part of a model stack computes in, chosen once at load time.

    compute   the matmuls and the activations between them (the half-precision part on a GPU)
    residual  the residual stream (every block's output is added to it) and the norms' weights
    head      the answer rows after the last layer's attention (its o_proj and MLP run on those rows only),
              the final norm and the LM head

`uniform(d)` runs everything in d (the CPU's float32, or a pure bf16 GPU run). `mixed(d)` keeps the residual
stream and the head in float32 around d matmuls: measured on an H200 with SmolLM2, bf16 alone is 0.24 away from
float32 in logprob, and most of that is range lost in the residual sum and the head, not in the products.

`split_head` (set by `mixed` for a half compute dtype): the head's weights (the LM head and the last layer's
o/gate/up/down) are kept in the compute dtype, and every float32 activation that meets them is multiplied as a
split product (`spinfc.backend.split_product`: two half parts, float32 output), exact in the weights' values and
about 22 bits (fp16) of the activation, at about 1/7 of a float32 GEMM's time on an H200. The head's activations,
the final norm and its output stay float32; so do the norms' weights and the embedding table, which is only read
(a tied LM head is then a second copy of the table, in the compute dtype: on SmolLM2, whose GGUF weights are not
fp16 values, an fp16 lookup table moved the CPU's logprobs 0.029 from float32 where a float32 one gives 0.017).
Fingerprints name such a scheme as before: `fp16-mixed` is fp16 matmuls around a float32 residual stream and a
float32 head whose weights are in fp16.

Quantized linear layers (`spinfc.runtime.quant`) take their input in any of these dtypes and write `compute`.
"""

from __future__ import annotations

import re

import attrs
import torch

from spinfc.backend.serving import CUDA_DTYPE
from spinfc.backend.split_product import HALVES  # the dtypes a split product multiplies in

SHORT_NAMES = {torch.float32: "float32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# Checkpoint names a policy places by role (Hugging Face naming).
_NORM = re.compile(r"(norm\.weight$)|(layernorm\.weight$)|(\.A_log$)|(\.dt_bias$)")  # and Qwen3.5's decay
_HEAD = ("model.embed_tokens.weight", "lm_head.weight", "score.weight", "model.norm.weight")  # score: a decision head
_READ_ONLY = ("model.embed_tokens.weight", "model.norm.weight")  # of the head's: read, never multiplied
_ANSWER_ROW_WEIGHTS = ("self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                       "mlp.down_proj.weight",
                       # Qwen3.5-MoE's sparse block: the shared expert, its gate, the router and the routed experts
                       "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                       "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight", "mlp.gate.weight",
                       "mlp.experts.gate_up_proj", "mlp.experts.down_proj")


@attrs.frozen
class Precision:
    compute: torch.dtype
    residual: torch.dtype
    head: torch.dtype
    split_head: bool = False  # the head's weights in `compute`, multiplied as split products (module docstring)

    @classmethod
    def uniform(cls, dtype: torch.dtype) -> "Precision":
        return cls(dtype, dtype, dtype)

    @classmethod
    def mixed(cls, dtype: torch.dtype) -> "Precision":
        return cls(dtype, torch.float32, torch.float32, split_head=dtype in HALVES)

    @classmethod
    def of(cls, value: "Precision | torch.dtype | None") -> "Precision":
        """A `Precision` as given, or `uniform(dtype)` for a plain dtype (None: float32)."""
        if isinstance(value, Precision):
            return value
        return cls.uniform(value or torch.float32)

    @property
    def is_mixed(self) -> bool:
        return (self.residual, self.head) != (self.compute, self.compute)

    def name(self, linear: str | None = None) -> str:
        """The scheme's name in a fingerprint: the linear layers' scheme (`fp8-static`, `int8-static`) or the
        compute dtype (`float32`, `bf16`, `fp16`), with `-mixed` when the residual stream and the head differ."""
        base = linear or SHORT_NAMES.get(self.compute, str(self.compute).removeprefix("torch."))
        return f"{base}-mixed" if self.is_mixed else base

    @property
    def head_weights(self) -> torch.dtype:
        """The dtype of the head's weights (the LM head, the last layer's answer-row weights): `compute` with
        `split_head`, else `head`."""
        return self.compute if self.split_head else self.head

    def dtype_of(self, key: str, last_layer: int) -> torch.dtype:
        """The dtype a floating-point checkpoint tensor is kept in: norms in `residual`; the embeddings and the
        final norm in `head`; the LM head and the last layer's answer-row weights in `head_weights`; every other
        weight in `compute`."""
        kind = role(key, last_layer)
        if kind == "head" and key in _READ_ONLY:
            return self.head
        return {"head": self.head_weights, "answer": self.head_weights, "residual": self.residual}.get(kind,
                                                                                                      self.compute)


def role(key: str, last_layer: int) -> str:
    """What a checkpoint tensor is to a policy: "head" (embeddings, LM head, final norm), "answer" (the last
    layer's o/gate/up/down, which only ever see answer rows), "residual" (a norm's weight) or "compute"."""
    if key in _HEAD:
        return "head"
    if _NORM.search(key):
        return "residual"
    if key.startswith(f"model.layers.{last_layer}.") and key.endswith(_ANSWER_ROW_WEIGHTS):
        return "answer"
    return "compute"


def resolved_precision(settings) -> Precision:
    """The `Precision` an engine's settings load with: `dtype` (default float32 on the CPU, `CUDA_DTYPE` on CUDA),
    mixed or uniform."""
    on_cuda = settings.resolved_device().startswith("cuda")
    dtype = getattr(torch, settings.dtype or (CUDA_DTYPE if on_cuda else "float32"))
    return Precision.mixed(dtype) if settings.precision == "mixed" and dtype != torch.float32 else \
        Precision.uniform(dtype)
