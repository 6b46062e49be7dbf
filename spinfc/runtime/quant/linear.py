"""`QuantizedLinear`: one W8A8 linear layer (a weight in 8 bits with per-channel scales, and the static scale of
its input, or none where the scheme scales each input row itself: fp8-dynamic), as a model stack's weight entry.
`Model.linear(x, weight)` calls it in place of `F.linear`.

On CUDA it runs the 8-bit GEMM:
  fp8-static   `torch._scaled_mm` on the quantized input and weight, with the input's per-tensor scale and the
               weight's per-channel scales applied inside the GEMM (row-wise scaling: the input scale broadcast
               to [M, 1], the weight's [1, N]); where this torch/GPU cannot scale row-wise, the product is taken
               with per-tensor scales and the weight's scales are applied after it; fast accumulation
               (`FP8_FAST_ACCUMULATION`)
  int8-static  `torch._int_mm` (int8 x int8 -> int32), both scales applied after it in float32, in the same pass
               that writes the output dtype (`backend.kernels.scale_columns`)
  fp8-dynamic  as fp8-static, with each input row's own scale (max |x_row| / 448, `token_scales`) as the
               [M, 1] row-wise scale: the input is quantized here, one Triton pass per row (`kernels.quantize_tokens`),
               never by the kernel that produced it (the scale needs the whole row first)
The input is either a float tensor, quantized here with the static scale (one pass, `backend.kernels.quantize`),
or a `QuantizedInput` that the kernel producing it (a norm, the gated activation, attention) already wrote in 8
bits with this layer's `activation_quant`, so no pass reads the activation between that kernel and the GEMM.
On the CPU (and anywhere else) it is the dequantized reference: the input quantized and dequantized with its
scale, multiplied in float32 with the dequantized weight (kept from load time), so tests see the same rounding
of every activation that the GPU path sees; an fp8 product asked for a half dtype is rounded to bf16 first, as
`_scaled_mm` with row-wise scales writes only bf16.

A row's output depends on that row alone: the input scale is static or the row's own, and the GEMMs are checked
for row invariance at start-up by whoever captures the launch shapes (`benchmarks/gpu_quant.py` checks every shape
of the launch).
"""

from __future__ import annotations

import attrs
import torch
import torch.nn.functional as F

from spinfc.backend.kernels.quantize_reference import ActivationQuant, quantize_reference, quantize_tokens_reference
from spinfc.runtime.quant.schemes import Scheme
from spinfc.runtime.quant.schemes import scheme as scheme_named

# Per device: how this torch scales an fp8 product ("rowwise", or "tensorwise" with the weight scales after it).
_FP8_MODE: dict[torch.device, str] = {}
# fp8 products accumulate in the tensor cores' own precision, without cuBLAS promoting the partial sums to float32
# every few k-steps (what torchao's float8 inference configs do by default). Measured on an H200 at 19,200 rows
# (benchmarks/NOTES.md, 2026-12-01): one Llama-3-8B layer's four row-wise products 6.89 ms -> 6.22 ms (gate/up 3.80
# -> 3.30), every one still row invariant; the precision it costs is measured with the scheme's.
FP8_FAST_ACCUMULATION = True


@attrs.frozen(eq=False)
class QuantizedInput:
    """An activation already quantized for a layer: `data` [M, K] in the scheme's storage dtype, quantized with
    `scale` (the layer's own input_scale tensor: a layer refuses an input quantized for another)."""

    data: torch.Tensor
    scale: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return self.data.shape


class QuantizedLinear:
    """weight: [N, K] in the scheme's storage dtype, weight_scale: [N] float32, input_scale: [] float32 (None for
    a dynamic scheme: each input row is scaled by itself)."""

    def __init__(self, scheme: Scheme | str, weight: torch.Tensor, weight_scale: torch.Tensor,
                 input_scale: torch.Tensor | None):
        self.scheme = scheme_named(scheme) if isinstance(scheme, str) else scheme
        if weight.dtype != self.scheme.storage or weight.dim() != 2:
            raise ValueError(f"{self.scheme.name}: the weight must be [N, K] {self.scheme.storage}, "
                             f"not {tuple(weight.shape)} {weight.dtype}")
        if (input_scale is None) != self.scheme.dynamic:
            raise ValueError(f"{self.scheme.name}: " + ("a dynamic scheme takes no input scale" if self.scheme.dynamic
                                                        else "a static scheme needs the input's scale"))
        self.weight = weight
        self.weight_scale = weight_scale.float().reshape(-1).expand(weight.shape[0]).contiguous()  # [N]
        self._dequantized: torch.Tensor | None = None  # [N, K] float32, the CPU reference's weight
        self._epilogue: torch.Tensor | None = None  # [N] float32: input scale x weight scales (int8)
        self.input_scale = self.inv_input_scale = self.activation_quant = None  # dynamic: no kernel writes the input
        if input_scale is not None:
            scale = input_scale.float()
            self.input_scale = scale if scale.dim() == 0 else scale.reshape(())  # []: `split` parts share this tensor
            self.inv_input_scale = 1.0 / self.input_scale  # []: activations are multiplied by it (one rounding)
            self.activation_quant = ActivationQuant(self.inv_input_scale, self.scheme.storage, self.scheme.q_min,
                                                    self.scheme.q_max)  # how a producing kernel writes this input

    # ---- what a stack reads ---------------------------------------------------------------------------------

    @property
    def shape(self) -> torch.Size:
        return self.weight.shape

    @property
    def device(self) -> torch.device:
        return self.weight.device

    def tensors(self) -> dict[str, torch.Tensor]:
        """The stored tensors by their compressed-tensors suffix (weight, weight_scale [N, 1], input_scale [1] where
        the scheme is static)."""
        stored = {"weight": self.weight, "weight_scale": self.weight_scale[:, None]}
        return stored if self.input_scale is None else {**stored, "input_scale": self.input_scale.reshape(1)}

    def to(self, device: torch.device | str | None = None) -> "QuantizedLinear":
        """This layer with every tensor on `device` (itself when they all are already)."""
        tensors = (self.weight, self.weight_scale, self.input_scale)
        if device is None or all(t is None or t.device == torch.device(device) for t in tensors):
            return self
        return QuantizedLinear(self.scheme, self.weight.to(device), self.weight_scale.to(device),
                               None if self.input_scale is None else self.input_scale.to(device))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight as floats [N, K] (what a layer kept in higher precision multiplies with)."""
        return self.scheme.dequantize(self.weight, self.weight_scale[:, None]).to(dtype)

    # ---- fusing q/k/v and gate/up ---------------------------------------------------------------------------

    @classmethod
    def cat(cls, parts: list["QuantizedLinear"]) -> "QuantizedLinear":
        """The parts' outputs stacked, as one layer: weights and their per-channel scales concatenated; the input
        scale is the largest of the parts' (they read the same input, so calibration gave them the same one; a
        dynamic scheme has none)."""
        first = parts[0].scheme
        if any(p.scheme != first for p in parts):
            raise ValueError("cannot fuse linear layers of different quantization schemes")
        input_scale = None if first.dynamic else torch.stack([p.input_scale for p in parts]).amax()
        return cls(first, torch.cat([p.weight for p in parts]), torch.cat([p.weight_scale for p in parts]),
                   input_scale)

    def split(self, sizes: tuple[int, ...]) -> tuple["QuantizedLinear", ...]:
        """Views of this layer's rows, one per size (the inverse of `cat`, sharing storage)."""
        weights, scales = self.weight.split(sizes), self.weight_scale.split(sizes)
        return tuple(QuantizedLinear(self.scheme, w, s, self.input_scale) for w, s in zip(weights, scales))

    # ---- the product ----------------------------------------------------------------------------------------

    def wrap(self, q: torch.Tensor) -> QuantizedInput:
        """q: [M, K], written by a kernel with `activation_quant` -> this layer's input."""
        return QuantizedInput(q, self.input_scale)

    def __call__(self, x: "torch.Tensor | QuantizedInput", out_dtype: torch.dtype) -> torch.Tensor:
        """x: [M, K] (any float dtype, or already quantized for this layer) -> [M, N] in `out_dtype`."""
        if isinstance(x, QuantizedInput):
            if self.input_scale is None or x.scale is not self.input_scale:
                raise ValueError(f"{self.scheme.name}: an input quantized with another layer's scale reached this "
                                 "layer: the kernel that wrote it must use this layer's activation_quant")
            q, scale = x.data, self.input_scale
        elif self.scheme.dynamic:
            q, scale = self.quantize_tokens(x)  # [M, K], [M, 1]
        else:
            q, scale = self.quantize_input(x), self.input_scale  # [M, K], []
        if q.is_cuda:
            if self.scheme.kind == "float":
                return self._fp8_cuda(q, scale, out_dtype)
            return self._int8_cuda(q, out_dtype)
        return self.reference(q, out_dtype, scale)

    def quantize_input(self, x: torch.Tensor) -> torch.Tensor:
        """x * (1 / input_scale), clamped (and rounded half to even for int8), in the storage dtype: one Triton
        pass on CUDA (`backend.kernels.quantize`), the same arithmetic in torch elsewhere (a static scheme's)."""
        s = self.scheme
        if x.is_cuda:
            from spinfc.backend.kernels.quantize import quantize  # Triton, the gpu extra: on CUDA only

            return quantize(x, self.inv_input_scale, s.storage, s.q_min, s.q_max)
        return quantize_reference(x, self.inv_input_scale, s.storage, s.q_min, s.q_max)

    def quantize_tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [M, K] -> (each row over its own scale, in the storage dtype [M, K]; the scales [M, 1] float32): one
        Triton pass on CUDA (`backend.kernels.quantize_tokens`), the scheme's torch arithmetic elsewhere."""
        if x.is_cuda:
            from spinfc.backend.kernels.quantize_tokens import quantize_tokens as kernel  # Triton: on CUDA only

            return kernel(x, self.scheme)
        return quantize_tokens_reference(x, self.scheme)

    def reference(self, q: torch.Tensor, out_dtype: torch.dtype, scale: torch.Tensor | None = None) -> torch.Tensor:
        """The dequantized reference: dequantize(q) @ dequantize(weight)^T in float32 (`scale`: q's, [] or [M, 1];
        default the static input scale)."""
        if self._dequantized is None or self._dequantized.device != q.device:
            self._dequantized = self.dequantize(torch.float32)
        scale = self.input_scale if scale is None else scale
        out = F.linear(self.scheme.dequantize(q, scale), self._dequantized)
        if self.scheme.kind == "float" and out_dtype in (torch.float16, torch.bfloat16):
            out = out.to(torch.bfloat16)  # as the GPU's row-wise fp8 product writes it (bf16 only), then out_dtype
        return out.to(out_dtype)

    def _fp8_cuda(self, q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        """q [M, K] fp8, scale [] (static) or [M, 1] (per token) -> [M, N] in `out_dtype`."""
        mode = _FP8_MODE.get(q.device) or _probe_fp8(q.device)
        weight_t = self.weight.t()  # [K, N], column-major as _scaled_mm wants
        if mode == "rowwise":
            scale_a = scale.expand(q.shape[0], 1).contiguous()  # [M, 1]
            return torch._scaled_mm(q, weight_t, scale_a=scale_a, scale_b=self.weight_scale[None, :],
                                    out_dtype=torch.bfloat16, use_fast_accum=FP8_FAST_ACCUMULATION).to(out_dtype)
        if scale.dim() == 0:
            out = torch._scaled_mm(q, weight_t, scale_a=scale, scale_b=_one(q.device), out_dtype=torch.float32,
                                   use_fast_accum=FP8_FAST_ACCUMULATION)
            return _scale_columns(out, self.weight_scale, out_dtype)
        out = torch._scaled_mm(q, weight_t, scale_a=_one(q.device), scale_b=_one(q.device), out_dtype=torch.float32,
                               use_fast_accum=FP8_FAST_ACCUMULATION)  # per-token scales after it, then the columns'
        return _scale_columns(out * scale, self.weight_scale, out_dtype)

    def _int8_cuda(self, q: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        if self._epilogue is None or self._epilogue.device != q.device:
            self._epilogue = (self.input_scale * self.weight_scale).contiguous()  # [N]
        acc = torch._int_mm(q, self.weight.t())  # [M, N] int32
        return _scale_columns(acc, self._epilogue, out_dtype)


def _scale_columns(acc: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """acc [M, N] * scale [N] in `out_dtype`, in one pass (the Triton epilogue; torch's two where it is absent)."""
    try:
        from spinfc.backend.kernels.scale_columns import scale_columns
    except ImportError:  # no Triton on this CUDA machine
        return (acc.float() * scale).to(out_dtype)
    return scale_columns(acc, scale, out_dtype)


_ONES: dict[torch.device, torch.Tensor] = {}


def _one(device: torch.device) -> torch.Tensor:
    if device not in _ONES:
        _ONES[device] = torch.ones((), dtype=torch.float32, device=device)
    return _ONES[device]


def _probe_fp8(device: torch.device) -> str:
    """Whether this torch takes row-wise scales in `_scaled_mm` (torch >= 2.5 on sm89+): tried once per device on
    a small product, outside any graph capture (the first eager forward of a warm-up reaches it)."""
    a = torch.ones(32, 64, device=device).to(torch.float8_e4m3fn)
    b = torch.ones(32, 64, device=device).to(torch.float8_e4m3fn)
    try:
        out = torch._scaled_mm(a, b.t(), scale_a=torch.full((32, 1), 2.0, device=device),
                               scale_b=torch.full((1, 32), 0.5, device=device), out_dtype=torch.bfloat16,
                               use_fast_accum=FP8_FAST_ACCUMULATION)
        mode = "rowwise" if torch.allclose(out.float(), torch.full_like(out.float(), 64.0)) else "tensorwise"
    except (RuntimeError, TypeError, NotImplementedError):
        mode = "tensorwise"
    _FP8_MODE[device] = mode
    return mode


def fp8_mode(device: torch.device | str) -> str:
    """The fp8 scaling mode used on `device` ("rowwise" or "tensorwise"), probing it if not done yet."""
    device = torch.device(device)
    return _FP8_MODE.get(device) or _probe_fp8(device)
