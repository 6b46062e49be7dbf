"""Qwen3.5 (dense, text): a hybrid of Gated DeltaNet layers (linear attention: a gated delta-rule recurrence after a
short depthwise causal convolution) and gated full-attention layers, three to one (`config.linear.layers`).

Full-attention layers: q_proj writes each head's query and an output gate side by side ([T, H, 2 Dh]); q and k
are RMS-normed per head; rope turns only the first `rotary_dim` dims of a head (partial rotary); the attention's
output is multiplied by sigmoid(gate) before o_proj. Tree attention over the pass, as every stack. A pass holding
images (the vision tower: towers.py) turns rope by M-RoPE's three positions per row.

Gated DeltaNet layers: in_proj_qkv -> conv1d (per channel, kernel K, silu) -> q, k, v heads; beta = sigmoid(b),
g = -exp(A_log) * softplus(a + dt_bias); the gated delta rule (backend/gated_delta.py) along each row's own chain
of the question tree (a branch continues its parent's state: runtime/models/state_flow.py); an RMS norm per value
head times silu(z) (weight w, not 1 + w); out_proj. Every other norm multiplies by (1 + w) (weights stored around
0). The MLP is SiLU-gated.

Qwen3.5-MoE (`config.experts`): every layer's MLP is a sparse block instead: a router (softmax over the experts,
the top k renormalised) picks each token's experts, whose weighted sum (models/experts.py) is added to a shared
expert (a SiLU-gated MLP of width `config.intermediate`) times sigmoid(shared_gate . h).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.runtime.models import experts
from spinfc.runtime.models.base import Model, fuse_into
from spinfc.runtime.models.qwen3_5.config import text_weights
from spinfc.runtime.models.state_flow import TreeFlow

_BLOCK = {"input_norm": "input_layernorm.weight", "post_attn_norm": "post_attention_layernorm.weight",
          "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight", "down": "mlp.down_proj.weight"}
FULL_WEIGHTS = {**_BLOCK, "q": "self_attn.q_proj.weight", "k": "self_attn.k_proj.weight",
                "v": "self_attn.v_proj.weight", "o": "self_attn.o_proj.weight",
                "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight"}
# Qwen3.5-MoE: the shared expert under the dense MLP's short names, the router and the routed experts beside it
_MOE = {"gate": "mlp.shared_expert.gate_proj.weight", "up": "mlp.shared_expert.up_proj.weight",
        "down": "mlp.shared_expert.down_proj.weight", "shared_gate": "mlp.shared_expert_gate.weight",
        "router": "mlp.gate.weight", "experts_gate_up": "mlp.experts.gate_up_proj",
        "experts_down": "mlp.experts.down_proj"}
LINEAR_WEIGHTS = {**_BLOCK, "in_qkv": "linear_attn.in_proj_qkv.weight", "z": "linear_attn.in_proj_z.weight",
                  "b": "linear_attn.in_proj_b.weight", "a": "linear_attn.in_proj_a.weight",
                  "conv": "linear_attn.conv1d.weight", "A_log": "linear_attn.A_log",
                  "dt_bias": "linear_attn.dt_bias", "gated_norm": "linear_attn.norm.weight",
                  "o": "linear_attn.out_proj.weight"}


class Qwen3_5Model(Model):
    family = "qwen3_5"
    NORM_UNIT_OFFSET = True
    # The recurrence's segments are read off the pass on the host (backend/chains.py): no CUDA graph capture.
    CAPTURABLE = False

    def __init__(self, config, state_dict, **options):
        super().__init__(config, text_weights(state_dict), **options)

    def layer_weight_names(self, index: int) -> dict[str, str]:
        names = LINEAR_WEIGHTS if self.config.linear.layers[index] else FULL_WEIGHTS
        return {**names, **_MOE} if self.config.experts is not None else names

    def _check_shapes(self) -> None:
        c, lin = self.config, self.config.linear
        for index, w in enumerate(self.layers):
            if lin.layers[index]:
                want = {"in_qkv": (lin.conv_channels, c.hidden), "z": (lin.value_heads * lin.value_dim, c.hidden),
                        "b": (lin.value_heads, c.hidden), "a": (lin.value_heads, c.hidden),
                        "o": (c.hidden, lin.value_heads * lin.value_dim)}
                if w["conv"].dim() == 3:  # [C, 1, K] as conv1d stores it -> [C, K]
                    w["conv"] = w["conv"][:, 0].contiguous()
                want["conv"] = (lin.conv_channels, lin.conv_kernel)
            else:
                want = {"q": (2 * c.heads * c.head_dim, c.hidden), "k": (c.kv_heads * c.head_dim, c.hidden),
                        "v": (c.kv_heads * c.head_dim, c.hidden), "o": (c.hidden, c.heads * c.head_dim)}
            want.update(gate=(c.intermediate, c.hidden), down=(c.hidden, c.intermediate))
            if c.experts is not None:
                E, I = c.experts.count, c.experts.intermediate
                want.update(shared_gate=(1, c.hidden), router=(E, c.hidden), experts_gate_up=(E, 2 * I, c.hidden),
                            experts_down=(E, c.hidden, I))
            for short, shape in want.items():
                self.check_shape(index, short, shape)

    def fuse_projections(self) -> None:
        """gate and up as one product (`gate_up`), and a linear layer's four input projections as one (`in_all`)."""
        for w in self.layers:
            if "gate_up" in w or "in_all" in w:
                continue
            fuse_into(w, "gate_up", ("gate", "up"))
            if "in_qkv" in w:
                fuse_into(w, "in_all", ("in_qkv", "z", "b", "a"))

    # ---- the forward --------------------------------------------------------------------------------------------

    def state_flow(self, context: ForwardContext):
        """The flow of recurrent states through this forward: the context's own (a decode's), or the launch's
        question tree (made on first use, keeping the states the context asks for)."""
        if context.flow is None:
            context.flow = TreeFlow(self.config, context.launch, context.state_rows, context.states)
        return context.flow

    def layer(self, index: int, x, residual, context: ForwardContext, keep: torch.Tensor | None = None):
        """h = x + residual; h += mix(norm(h)) (Gated DeltaNet or gated attention); h += mlp(norm(h)); with
        `keep`, only those rows after the token mixing."""
        w = self.layers[index]
        h, residual = self.add_norm(x, residual, w["input_norm"])
        if self.config.linear.layers[index]:
            mixed = self.delta_net(index, w, h, context, keep)
        else:
            mixed = self.gated_attention(index, w, h, context, keep)
        if keep is not None:
            residual = residual[keep]  # [R, D]
        x, residual = self.project(mixed, w["o"], residual)
        if self.config.experts is not None:
            h, residual = self.add_norm(x, residual, w["post_attn_norm"], self.answer_dtype(keep))
            return self.sparse_mlp(w, h, residual.dtype), residual
        h, residual = self.add_norm(x, residual, w["post_attn_norm"], self.answer_dtype(keep), into=w.get("gate_up"))
        return self.project(self.mlp_hidden(w, h, "silu"), w["down"], residual)

    def sparse_mlp(self, w: dict, h: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """h: [T, D] normed -> the MoE block's output [T, D] in `dtype` (the residual's): the routed experts'
        weighted sum plus the shared expert times sigmoid(shared_gate . h) (transformers' Qwen3_5MoeSparseMoeBlock).
        The router's scores are written in float32 (at the answer rows under the mixed policy a split product of
        the float32 rows; elsewhere one product of the compute dtype), softmaxed and ranked in float32."""
        shared = self.linear(self.mlp_hidden(w, h, "silu"), w["down"], torch.float32)  # [T, D]
        shared = shared.float() * torch.sigmoid(self.linear(h, w["shared_gate"], torch.float32).float())
        weights, index = experts.choose(self.linear(h, w["router"], torch.float32), self.config.experts.top_k)
        routed = experts.weighted_sum(self, w["experts_gate_up"], w["experts_down"], h, weights, index, "silu")
        return (routed + shared).to(dtype)

    def gated_attention(self, index: int, w: dict, h: torch.Tensor, context: ForwardContext, keep) -> torch.Tensor:
        """h: [T, D] normed -> the heads' output times sigmoid(gate): [T or R, H * Dh] (before o_proj)."""
        c, T = self.config, h.shape[0]
        H, Hk, Dh = c.heads, c.kv_heads, c.head_dim
        q_gate = self.linear(h, w["q"]).view(T, H, 2 * Dh)
        q, gate = q_gate[..., :Dh], q_gate[..., Dh:]  # [T, H, Dh] each
        q = self.norm(q.reshape(T * H, Dh), w["q_norm"]).view(T, H, Dh)
        k = self.norm(self.linear(h, w["k"]).view(T * Hk, Dh), w["k_norm"]).view(T, Hk, Dh)
        v = self.linear(h, w["v"]).view(T, Hk, Dh)
        q, k = self.partial_rope(q, context.launch), self.partial_rope(k, context.launch)
        out = context.attention(self, index, q, k, v, scale=Dh**-0.5, window=None)  # [T, H, Dh]
        if keep is not None:
            out, gate = out[keep], gate[keep]
        n = out.shape[0]
        gated = out.reshape(n, H * Dh).float() * torch.sigmoid(gate.reshape(n, H * Dh).float())
        return gated.to(self.answer_dtype(keep) or self.dtype)

    def partial_rope(self, x: torch.Tensor, launch: Launch) -> torch.Tensor:
        """Rope on the first `rotary_dim` dims of each head (their own frequencies), the rest as they are; in a
        pass holding images, M-RoPE: each frequency turns by one of the row's (t, h, w) positions
        (`launch.rope_positions`, sections `config.mrope_sections`; a text row's three are equal, so it turns as
        plain rope). Text passes carry no extra positions and take the plain kernel."""
        rd, c = self.config.rotary_dim, self.config
        part = x[..., :rd].contiguous()
        if launch.rope_positions is not None:
            turned = self.ops.apply_rope(part, launch.rope_positions, c.rope_theta, None, c.mrope_sections)
        else:
            turned = self.ops.apply_rope(part, launch.positions, c.rope_theta)
        return torch.cat((turned, x[..., rd:]), dim=-1)

    def delta_net(self, index: int, w: dict, h: torch.Tensor, context: ForwardContext, keep) -> torch.Tensor:
        """h: [T, D] normed -> the Gated DeltaNet's gated-normed output [T or R, Hv * Dv] (before out_proj)."""
        lin, T = self.config.linear, h.shape[0]
        Hk, Hv, Dk, Dv = lin.key_heads, lin.value_heads, lin.key_dim, lin.value_dim
        if "in_all" in w:
            projected = self.linear(h, w["in_all"])  # [T, C + Hv Dv + 2 Hv]
            qkv, z, b, a = projected.split((lin.conv_channels, Hv * Dv, Hv, Hv), dim=-1)
        else:
            qkv, z, b, a = (self.linear(h, w[name]) for name in ("in_qkv", "z", "b", "a"))
        flow = self.state_flow(context)
        mixed = flow.conv(index, qkv, w["conv"])  # [T, C]
        q, k, v = mixed.split((Hk * Dk, Hk * Dk, Hv * Dv), dim=-1)
        beta = torch.sigmoid(b.float())  # [T, Hv]
        g = -w["A_log"].float().exp() * F.softplus(a.float() + w["dt_bias"].float())  # [T, Hv], log decay
        out = flow.delta(index, q.reshape(T, Hk, Dk), k.reshape(T, Hk, Dk), v.reshape(T, Hv, Dv), g, beta)
        if keep is not None:
            out, z = out[keep], z[keep]
        n = out.shape[0]
        return self.gated_norm(out.reshape(n * Hv, Dv), z.reshape(n * Hv, Dv), w["gated_norm"],
                               self.answer_dtype(keep) or self.dtype).view(n, Hv * Dv)

    def gated_norm(self, x, gate, weight, dtype) -> torch.Tensor:
        """RMS norm of each value head times w, times silu(gate), in float32: [n, Dv] in `dtype`."""
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.config.norm_eps)
        return (normed * weight.float() * F.silu(gate.float())).to(dtype)
