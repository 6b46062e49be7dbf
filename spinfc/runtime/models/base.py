"""`Model`: what every family's stack shares: weights by name, the attention and MLP blocks, and the forward of one
packed launch down to the log-probabilities of its answer reads.

A stack calls its element-wise ops through `self.ops` (the PyTorch reference by default, or a Triton backend with
the same function names), its attention through the forward's `ForwardContext` (backend/forward_context.py: the
launch's tree by default; what the caller says otherwise, and which keys it keeps), and its linear layers through
`self.linear`: a weight entry is a tensor (a plain torch matmul in the weight's dtype), a `quant.QuantizedLinear`
(a W8A8 GEMM) or a `quant.Int4Linear` (a W4A16 GEMM: int4 weights dequantized inside it), chosen at load time. A
family subclass says how a layer is wired (`layer`), which per-layer weights it has (`LAYER_WEIGHTS`), and how
tokens are embedded (`embed`, `inputs`). Which dtype each part computes in is the model's `Precision` (runtime/load/precision.py).

Where a linear layer is quantized with a static input scale, the kernel that produces its input (the norm before
q/k/v and gate/up, attention before o, the gated activation before down) writes that input in 8 bits itself
(`into=` the layer: `quantize_in_kernels`), so no separate pass quantizes it.

Every layer hands on its output as two parts, `x` (the block's last output, not yet added) and `residual`: the
hidden state is x + residual, and the next norm adds them (`ops.add_rms_norm`) so a fused kernel can do both.
"""

from __future__ import annotations

import copy
import hashlib
import types
from typing import ClassVar

import torch
import torch.nn.functional as F

from spinfc.backend import reference, split_product
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.registry import load_tokenizer
from spinfc.runtime.load.precision import Precision, role
from spinfc.runtime.models.decode import decode
from spinfc.runtime.quant.int4 import Int4Linear
from spinfc.runtime.quant.linear import QuantizedInput, QuantizedLinear
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, WeightMismatch
from spinfc.runtime.weights.decision_head import CODE_HEAD

# Per-layer weights: short name -> Hugging Face name under `model.layers.N.`
COMMON_LAYER_WEIGHTS = {
    "input_norm": "input_layernorm.weight",
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}
# The quantized layer kinds a weight entry may be (each with shape, device, to, dequantize, tensors, cat, split and
# a call `(x, out_dtype)`); only a W8A8 layer takes its input quantized (`Model.quantized_reader`).
QUANTIZED = (QuantizedLinear, Int4Linear)
# Names a checkpoint may carry that the stacks have no use for.
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def _default_ops() -> types.ModuleType:
    return reference


def tensors_hash(state: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes (copied to the CPU): stable for the same weights."""
    digest = hashlib.sha256()
    state = _flat(state)
    for name in sorted(state):
        tensor = state[name].detach().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).cpu().numpy().tobytes())
    return digest.hexdigest()


def _flat(state: dict) -> dict[str, torch.Tensor]:
    """A state dict whose quantized entries are spelled out as their tensors (name.weight_scale, ...)."""
    flat = {}
    for name, value in state.items():
        if isinstance(value, QUANTIZED):
            stem = name.removesuffix(".weight")
            flat.update({f"{stem}.{suffix}": tensor for suffix, tensor in value.tensors().items()})
        else:
            flat[name] = value
    return flat


class Model:
    family: ClassVar[str]
    LAYER_WEIGHTS: ClassVar[dict[str, str]] = COMMON_LAYER_WEIGHTS
    NORM_UNIT_OFFSET: ClassVar[bool] = False  # Gemma multiplies by (1 + w)
    # Whether the layers hand the output projections (o, down) through `project` (Gemma norms them first).
    PROJECTS_INTO_RESIDUAL: ClassVar[bool] = True
    # The norms and the gated activation write a quantized layer's input in 8 bits themselves (set False on an
    # instance to quantize in a separate pass instead, as a benchmark compares).
    quantize_in_kernels: bool = True

    def __init__(
        self,
        config: ModelConfig,
        state_dict: dict[str, torch.Tensor],
        *,
        ops=None,
        name: str | None = None,
        weights_hash: str | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        fuse: bool | None = None,
        residual_in_matmul: bool | None = None,
        precision: Precision | None = None,
        quant_scheme: str | None = None,
    ):
        """Build a stack from a config and a state dict in Hugging Face naming (tensors are moved to `device` and
        cast to `dtype` where given, or placed by `precision`: see `Precision.dtype_of`). A state entry may be a
        `QuantizedLinear` (its scheme named by `quant_scheme`); the last layer's o/gate/up/down, which only see
        answer rows, are dequantized to the head's weights' dtype (`Precision.head_weights`). Without
        `weights_hash`, the hash is computed from the tensors' bytes (which reads every weight: pass a label for
        large random-weight models). `fuse` (default:
        on CUDA) concatenates each layer's q/k/v and gate/up weights so a layer runs two matmuls where it ran five
        (`fuse_projections`). `residual_in_matmul` (default: on CUDA) adds the output projections (o, down) into
        the residual stream inside their matmuls where the family allows it (`project`)."""
        if config.family != self.family:
            raise ValueError(f"{type(self).__name__} builds {self.family} models, not a {config.family} config")
        self.config, self.name, self.ops = config, name, ops or _default_ops()
        # per layer with keys and values, its slot: the order a forward keeps them in (`ForwardContext.keep`, the
        # extraction pool, the content cache)
        layers = [index for index in range(config.layers) if not config.is_recurrent(index)]
        self.attention_slots = {index: slot for slot, index in enumerate(layers)}
        self.residual_in_matmul = False  # decided below, once the weights are on their device
        self.quant_scheme = quant_scheme
        if precision is None and dtype is None:  # keep the checkpoint's dtypes
            embed = state_dict.get("model.embed_tokens.weight")
            precision = Precision.uniform(embed.dtype if embed is not None else torch.float32)
            place = lambda key, tensor: tensor.dtype  # noqa: E731
        else:
            precision = precision or Precision.uniform(dtype)
            place = lambda key, tensor: precision.dtype_of(key, config.layers - 1)  # noqa: E731
        self.precision = precision
        state = {}
        for key, value in state_dict.items():
            if key.endswith(IGNORED_SUFFIXES):
                continue
            if isinstance(value, QUANTIZED):
                value = value.to(device)
                if role(key, config.layers - 1) in ("head", "answer"):  # answer rows and the head: no low-bit GEMM
                    value = value.dequantize(precision.head_weights)
            elif value.is_floating_point():
                moved = value.to(device=device, dtype=place(key, value))
                # A fresh CPU allocation: CPU matmul kernels may round differently on buffers aligned differently,
                # and tensors read from a file sit at the file's offsets (the same weights read from a GGUF file or
                # from its cached copy would otherwise score in different bits).
                value = moved.clone() if moved.device.type == "cpu" and moved.data_ptr() == value.data_ptr() else moved
            else:
                value = value.to(device=device)
            state[key] = value
        self.weights_hash = weights_hash or tensors_hash(state)
        take = lambda key: self._take(state, key)  # noqa: E731
        self.embed_weight = take("model.embed_tokens.weight")  # [V, D]
        self.final_norm = take("model.norm.weight")  # [D]
        if config.codes is not None:  # a decision model: the head reads its codes (weights/decision_head.py)
            self.lm_head = take(CODE_HEAD)  # [C, D]
            if tuple(self.lm_head.shape) != (len(config.codes), config.hidden):
                raise UnsupportedModel(f"the decision head {CODE_HEAD} has shape {tuple(self.lm_head.shape)}; "
                                       f"config.json names {len(config.codes)} codes of {config.hidden} hidden units")
        elif config.tie_embeddings:
            state.pop("lm_head.weight", None)
            # the table itself, or under `Precision.split_head` a copy in the compute dtype (the lookup stays float32)
            wanted = precision.head_weights if precision.split_head else self.embed_weight.dtype
            self.lm_head = self.embed_weight if self.embed_weight.dtype == wanted else self.embed_weight.to(wanted)
        else:
            self.lm_head = take("lm_head.weight")  # [V, D]
        self.layers = self.take_stack(take)
        if state:
            unexpected = ", ".join(sorted(state)[:5])
            raise WeightMismatch(f"the {self.family} stack has no use for {len(state)} tensor(s) ({unexpected}"
                                 f"{', ...' if len(state) > 5 else ''}), of another architecture or of a feature spinfc "
                                 "does not implement", sorted(state)[0])
        self._check_shapes()
        on_cuda = self.device.type == "cuda"
        if on_cuda if fuse is None else fuse:
            self.fuse_projections()
        # The add inside the matmul rounds the sum once, to the residual stream's dtype: the matmul's own (uniform
        # precision) or float32 around half matmuls (the mixed policy: a half GEMM that writes float32).
        self.residual_in_matmul = on_cuda if residual_in_matmul is None else residual_in_matmul

    def fuse_projections(self) -> None:
        """Give every layer `qkv` ([(H + 2 Hk) Dh, D]: q, k, v stacked) and `gate_up` ([2 F, D]) weights, and make
        q, k, v, gate and up views into them (no second copy is kept). The forward then runs one matmul for q, k
        and v and one for gate and up: larger products run closer to the matrix units' rate. A row's result is
        still that row's alone (each output element is the same dot product), so batch invariance is unchanged."""
        for w in self.layers:
            if "qkv" in w or "gate_up" in w:
                continue
            fuse_into(w, "qkv", ("q", "k", "v"))
            fuse_into(w, "gate_up", ("gate", "up"))

    def layer_weight_names(self, index: int) -> dict[str, str]:
        """Layer `index`'s weights: short name -> Hugging Face name under `model.layers.N.` (`LAYER_WEIGHTS`; a
        family whose layers differ says so per layer)."""
        return self.LAYER_WEIGHTS

    def take_stack(self, take) -> list[dict]:
        """Each layer's weights by short name (`layer_weight_names`), taken with `take(hf_name)`; a family with
        weights beyond the layers, the embeddings, the final norm and the head takes them here too."""
        return [{short: take(f"model.layers.{i}.{long}") for short, long in self.layer_weight_names(i).items()}
                for i in range(self.config.layers)]

    @staticmethod
    def _take(state: dict[str, torch.Tensor], key: str) -> torch.Tensor:
        if key not in state:
            raise WeightMismatch(f"no tensor {key!r}, which the model stack needs", key)
        return state.pop(key)

    def _check_shapes(self) -> None:
        """Every layer's projections and norms, the embeddings, the final norm and the head against the config."""
        c = self.config
        want = {
            "q": (c.heads * c.head_dim, c.hidden),
            "k": (c.kv_heads * c.head_dim, c.hidden),
            "v": (c.kv_heads * c.head_dim, c.hidden),
            "o": (c.hidden, c.heads * c.head_dim),
            "gate": (c.intermediate, c.hidden),
            "up": (c.intermediate, c.hidden),
            "down": (c.hidden, c.intermediate),
        }
        for index, w in enumerate(self.layers):
            for short in w:
                shape = want.get(short) or ((c.head_dim,) if short in ("q_norm", "k_norm") else (c.hidden,))
                self.check_shape(index, short, shape)
        self._check_tensor("model.embed_tokens.weight", self.embed_weight, (c.vocab, c.hidden))
        self._check_tensor("model.norm.weight", self.final_norm, (c.hidden,))
        if not c.tie_embeddings:
            rows = len(c.codes) if c.codes else c.vocab  # a decision model's head reads its codes, not the vocabulary
            self._check_tensor("lm_head.weight", self.lm_head, (rows, c.hidden))

    def check_shape(self, index: int, short: str, shape: tuple[int, ...]) -> None:
        """Raise WeightMismatch, naming the tensor, unless layer `index`'s weight `short` has `shape`."""
        self._check_tensor(f"model.layers.{index}.{self.layer_weight_names(index)[short]}", self.layers[index][short],
                           shape)

    @staticmethod
    def _check_tensor(name: str, tensor, shape: tuple[int, ...]) -> None:
        if tuple(tensor.shape) != tuple(shape):
            raise WeightMismatch(f"tensor {name!r} has shape {list(tensor.shape)} where config.json implies "
                                 f"{list(shape)}", name)

    # ---- what a tokenizer and the engine read -------------------------------------------------------------------

    @property
    def codes(self) -> tuple[str, ...]:
        """A decision model's codes (what its head reads at an answer row, in head order); empty for a model whose
        head reads the vocabulary."""
        return self.config.codes or ()

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype: matmuls and the activations between them."""
        return self.precision.compute

    @property
    def scheme(self) -> str:
        """The numeric scheme, as fingerprints name it: float32, bf16, bf16-mixed, fp8-static-mixed, ..."""
        return self.precision.name(self.quant_scheme)

    @property
    def device(self) -> torch.device:
        return self.embed_weight.device

    @property
    def tokenizer(self):
        """The model's tokenizer, through the registry (cached there)."""
        if self.name is None:
            raise ValueError("this model was built from a state dict without a name, so it has no tokenizer")
        return load_tokenizer(self.name)

    # ---- the forward --------------------------------------------------------------------------------------------

    def quantized_reader(self, into) -> QuantizedLinear | None:
        """`into` (the weight that reads an op's output) when that op should write it quantized for it: a layer of a
        static scheme (a dynamic one scales each row itself, from the whole row, in its own pass)."""
        return into if self.quantize_in_kernels and isinstance(into, QuantizedLinear) \
            and into.activation_quant is not None else None

    def norm(self, x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype | None = None, into=None):
        """The normed rows in `dtype` (default: the compute dtype, what the next matmul reads); where `into` (the
        weight that reads them) is a quantized layer, its `QuantizedInput` instead."""
        reader = self.quantized_reader(into)
        if reader is None:
            return self.ops.rms_norm(x, weight, self.config.norm_eps, self.NORM_UNIT_OFFSET, dtype or self.dtype)
        return reader.wrap(self.ops.rms_norm(x, weight, self.config.norm_eps, self.NORM_UNIT_OFFSET,
                                             quant=reader.activation_quant))

    def add_norm(self, x, residual, weight, dtype: torch.dtype | None = None, into=None) -> tuple:
        """(norm(x + residual), x + residual), the normed rows in `dtype` (default: the compute dtype; quantized
        for `into` where that is a quantized layer, see `norm`); the first layer has no residual yet and norms x
        alone; x None means the residual already holds the sum (`project`)."""
        if residual is None:
            return self.norm(x, weight, dtype, into), x
        if x is None:
            return self.norm(residual, weight, dtype, into), residual
        eps, offset, reader = self.config.norm_eps, self.NORM_UNIT_OFFSET, self.quantized_reader(into)
        if reader is None:
            return self.ops.add_rms_norm(x, residual, weight, eps, offset, dtype or self.dtype)
        normed, summed = self.ops.add_rms_norm(x, residual, weight, eps, offset, quant=reader.activation_quant)
        return reader.wrap(normed), summed

    def answer_dtype(self, keep) -> torch.dtype | None:
        """The dtype of rows after the last layer's attention when `keep` is set (the head's), else None."""
        return self.precision.head if keep is not None else None

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.embed_weight).to(self.precision.residual)  # [T, D]

    def linear(self, x: torch.Tensor, weight, out_dtype: torch.dtype | None = None) -> torch.Tensor:
        """x: [M, K] -> x @ weight^T [M, N]: a tensor weight multiplies in its own dtype (x is cast to it); a
        `QuantizedLinear` quantizes x with its static scale (unless x is already its `QuantizedInput`) and writes
        the compute dtype. A half weight that meets a float32 x (the head's rows under `Precision.split_head`) or
        is asked for a float32 result (`out_dtype`) writes float32: a split product of x's two half parts, or one
        half product where x is in the weight's dtype (`split_product.split_mm`). Any other `out_dtype` is not
        read."""
        if isinstance(weight, QUANTIZED):
            return weight(x, self.dtype)
        if isinstance(x, QuantizedInput):
            raise TypeError("a quantized activation reached a float linear layer: pass into= only a quantized one")
        if weight.dtype in split_product.HALVES and torch.float32 in (x.dtype, out_dtype):
            return split_product.split_mm(x, weight)
        return F.linear(x.to(weight.dtype), weight)

    def project(self, a: torch.Tensor, weight, residual) -> tuple[torch.Tensor | None, torch.Tensor]:
        """An output projection handed on as (x, residual): (a @ weight^T, residual), x written in the residual's
        dtype where `linear` can (a float32 residual around half matmuls); or, with
        `residual_in_matmul`, (None, residual + a @ weight^T) with the add inside the matmul (in place: cuBLAS's
        beta = 1, the sum rounded once from float32), so the next norm reads one tensor instead of two. Under the
        mixed policy the half GEMM adds into the float32 residual (`split_product.add_product`; a float32 `a`, the
        last layer's down at the answer rows, is a split product added after)."""
        if self.residual_in_matmul and residual is not None and isinstance(weight, torch.Tensor):
            if residual.dtype == weight.dtype:
                return None, residual.addmm_(a.to(weight.dtype), weight.t())
            if residual.dtype == torch.float32 and weight.dtype in split_product.HALVES:
                return None, split_product.add_product(residual, a, weight)
        return self.linear(a, weight, None if residual is None else residual.dtype), residual

    def attention(
        self, index: int, w: dict, h: torch.Tensor, context: ForwardContext, *, theta: float, window: int | None,
        qk_norm: bool, keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """h: [T, D] normed -> layer `index`'s attention block's output [T, D] (after o_proj); with `keep` ([R]
        rows), [R, D] in the head's dtype (see `attention_heads`)."""
        return self.linear(self.attention_heads(index, w, h, context, theta=theta, window=window, qk_norm=qk_norm,
                                                keep=keep), w["o"], self.answer_dtype(keep))

    def attention_heads(
        self, index: int, w: dict, h: torch.Tensor, context: ForwardContext, *, theta: float, window: int | None,
        qk_norm: bool, keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """h: [T, D] normed -> layer `index`'s heads' attention output [T, H * Dh] (before o_proj): projections,
        optional per-head q/k norms, rope at each row's position, and the context's attention (tree attention over
        the launch's spans, or what `context.reads` says). With `keep`
        ([R] row indices) only those rows are returned: [R, H * Dh] (every row's keys and values are still
        computed and attended). Where o_proj is a quantized layer (and `keep` is None: the answer rows' o_proj is
        not), the attention kernel writes o_proj's `QuantizedInput` itself."""
        c, T, launch = self.config, h.shape[0], context.launch
        H, Hk, Dh = c.heads, c.kv_heads, c.head_dim
        if "qkv" in w:
            qkv = self.linear(h, w["qkv"]).view(T, H + 2 * Hk, Dh)  # [T, H + 2 Hk, Dh]
            q, k, v = qkv.split((H, Hk, Hk), dim=1)  # views
        else:
            q = self.linear(h, w["q"]).view(T, H, Dh)  # [T, H, Dh]
            k = self.linear(h, w["k"]).view(T, Hk, Dh)  # [T, Hk, Dh]
            v = self.linear(h, w["v"]).view(T, Hk, Dh)  # [T, Hk, Dh]
        if qk_norm:
            q = self.norm(q.reshape(T * H, Dh), w["q_norm"]).view(T, H, Dh)
            k = self.norm(k.reshape(T * Hk, Dh), w["k_norm"]).view(T, Hk, Dh)
        # (One rope launch over q and k, adjacent heads of qkv, measured slower on an H200 than two: 40 heads pad
        # to 64 in the kernel's tile.)
        q = self.ops.apply_rope(q, launch.positions, theta)
        k = self.ops.apply_rope(k, launch.positions, theta)
        reader = self.quantized_reader(w["o"]) if keep is None else None
        # image blocks (`firsts`) attend both ways
        out = context.attention(self, index, q, k, v, scale=c.attention_scale, window=window, firsts=launch.firsts,
                                quant=reader.activation_quant if reader is not None else None)  # [T, H, Dh]
        if keep is not None:
            out = out[keep]  # [R, H, Dh]
        out = out.reshape(out.shape[0], H * Dh)
        return reader.wrap(out) if reader is not None else out

    def mlp(self, w: dict, h: torch.Tensor, kind: str) -> torch.Tensor:
        """h: [T, D] normed -> down(act(gate(h)) * up(h)): [T, D]."""
        return self.linear(self.mlp_hidden(w, h, kind), w["down"])

    def mlp_hidden(self, w: dict, h: torch.Tensor, kind: str) -> torch.Tensor:
        """h: [T, D] normed -> act(gate(h)) * up(h): [T, F] (the MLP before its down projection), written as the
        down projection's `QuantizedInput` where it is a quantized layer (`quantized_reader`)."""
        if "gate_up" in w:
            F_ = self.config.intermediate
            gate_up = self.linear(h, w["gate_up"])  # [T, 2F]
            gate, up = gate_up[:, :F_], gate_up[:, F_:]
        else:
            gate, up = self.linear(h, w["gate"]), self.linear(h, w["up"])
        reader = self.quantized_reader(w["down"])
        if reader is None:
            return self.ops.gated_act(gate, up, kind)
        return reader.wrap(self.ops.gated_act(gate, up, kind, quant=reader.activation_quant))

    def layer(
        self, index: int, x, residual, context: ForwardContext, keep: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, residual) [T, D] each -> the layer's (x, residual) over `context.launch`'s rows; with `keep` ([R]
        rows) the outputs hold those rows only, [R, D] each: attention still reads every row, and the rest of the
        layer runs on R rows."""
        raise NotImplementedError(f"{type(self).__name__} must say how its layers are wired")

    @torch.inference_mode()
    def forward(self, launch: Launch, context: ForwardContext | None = None) -> torch.Tensor:
        """log p(read_token[k] | what row rows[read_row[k]] sees), one float32 per read: [N]. Logits are
        computed only at the answer rows (`hidden`)."""
        return self.ops.answer_logprobs(self.hidden(launch, context), self.lm_head, launch.read_row,
                                        launch.read_token)

    @torch.inference_mode()
    def hidden(self, launch: Launch, context: ForwardContext | None = None) -> torch.Tensor:
        """The final-normed hidden states of the answer rows `launch.rows`: [R, D]. The last layer keeps only the
        answer rows after its attention (its o_proj and MLP run on R rows, not T: no other row's output is read).
        `context` says how attention reads and what the forward keeps (default: the launch's tree, nothing)."""
        context = ForwardContext(launch) if context is None else context
        if launch.cached is not None:  # some contents' rows come from the content cache (runtime/launch/cached_rows.py)
            return launch.cached.hidden(self, context)
        x, residual = self.inputs(context), None  # [T, D]
        last = self.config.layers - 1
        for index in range(last):
            x, residual = self.layer(index, x, residual, context)
        x, residual = self.layer(last, x, residual, context, keep=launch.rows)  # [R, D] each
        final, _ = self.add_norm(x, residual, self.final_norm, self.precision.head)  # [R, D]
        return final

    def inputs(self, context: ForwardContext) -> torch.Tensor:
        """The launch's rows as the first layer reads them: [T, D] embedded tokens, media rows the towers'."""
        launch = context.launch
        if launch.media is None:
            return self.embed(launch.tokens)
        # a media row's token is read as 0 (its row is then the tower's): an image token id past the text
        # embedding, as some Gemma 3 vision configs write it, is never looked up (transformers does the same)
        return self.place_media(self.embed(launch.tokens.index_fill(0, launch.media.rows, 0)), launch.media,
                                launch.tokens)

    @property
    def attention_layers(self) -> int:
        """Layers with keys and values."""
        return len(self.attention_slots)

    def with_ops(self, ops) -> "Model":
        """The same weights (shared, not copied) run by another backend (`spinfc.backend.reference`, ...)."""
        view = copy.copy(self)
        view.ops = ops
        return view

    __call__ = forward

    # the model's vision and audio towers (`towers.Towers`), attached by the loader; None: text only
    towers = None

    def place_media(self, x: torch.Tensor, media, tokens: torch.Tensor) -> torch.Tensor:
        """x: [T, D] embedded `tokens` ([T]) -> x with the rows `media.rows` overwritten by the towers' embeddings of
        `media.reads` (one batched forward per tower), cast to x's dtype as transformers casts them."""
        if media.placed is not None:  # embedded before a captured pass, at their rows: the same values placed
            return torch.where(media.mask[:, None], media.placed, x)
        if self.towers is None:
            raise ValueError("a pass holds media, and this model has no towers")
        embeddings = self.towers.embed(media.reads, device=x.device)  # [M, D]
        return x.index_copy(0, media.rows, embeddings.to(x.dtype))

    def head_logits(self, final: torch.Tensor) -> torch.Tensor:
        """final: [R, D] final-normed rows -> [R, V] float32 logits (what the decode paths take a softmax of)."""
        return split_product.head_logits(final, self.lm_head)

    # ---- generation ---------------------------------------------------------------------------------------------

    def decode(self, tokens: torch.Tensor, cache) -> torch.Tensor:
        """Generation, one sequence: tokens [T] int64 continue the sequence `cache` (a `decode.KVCache`) holds ->
        [V] float32 logits of the next token; the tokens' keys and values are appended to `cache`. The same
        layers as `forward`, with attention over the cache (spinfc.runtime.models.decode)."""
        return decode(self, tokens, cache)


def _cat(parts):
    """Weights stacked along their output rows: tensors, or quantized layers of one kind (`QuantizedLinear.cat`,
    `Int4Linear.cat`); None where the parts are of different kinds (a checkpoint that quantized some of them:
    they stay separate products)."""
    kinds = {type(part) for part in parts}
    if len(kinds) > 1:
        return None
    if isinstance(parts[0], QUANTIZED):
        return type(parts[0]).cat(list(parts))
    return torch.cat(parts)


def fuse_into(w: dict, fused: str, names: tuple[str, ...]) -> None:
    """w[fused] = the weights `names` stacked, and each of them a view into it; nothing where they cannot be
    stacked (`_cat`)."""
    stacked = _cat(tuple(w[name] for name in names))
    if stacked is None:
        return
    w[fused] = stacked
    for name, view in zip(names, stacked.split([w[name].shape[0] for name in names])):
        w[name] = view
