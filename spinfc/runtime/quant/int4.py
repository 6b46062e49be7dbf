"""`Int4Linear`: one W4A16 linear layer (group-wise int4 weights, activations in the compute dtype), as a model
stack's weight entry; `Model.linear(x, weight)` calls it in place of `F.linear`.

It reads and writes compressed-tensors' `pack-quantized` tensors (what llm-compressor's GPTQ and AWQ recipes write):
    weight_packed       [N, K / 8] int32  eight 4-bit values a word, lowest nibble first, each stored + 8
    weight_scale        [N, K / G]        one scale per output channel and group of G input channels
    weight_zero_point   [N / 8, K / G] int32, packed along N (asymmetric only; symmetric checkpoints have none)
    weight_shape        [2]               (N, K)
and holds them in the kernel's layout (`backend.kernels.int4_matmul`: transposed, zero points unpacked).

On CUDA a product of many rows (a scoring pass) dequantizes the weight in one pass and runs cuBLAS's half GEMM
(`backend.kernels.int4_dequantize`); a product of few rows (a decode step) is the Triton W4A16 GEMM (one tile
configuration: row invariant at every launch size). On the CPU (and anywhere else) it is the dequantized reference:
the weight dequantized once to float32 (exactly) and multiplied in float32, so the CPU's scores differ from a float32 model's only by the weights' rounding to 4 bits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from spinfc.backend.kernels.int4_reference import dequantize as dequantize_packed
from spinfc.runtime.quant.schemes import Scheme
from spinfc.runtime.quant.schemes import scheme as scheme_named


# A product of this many rows or more is bound by its multiplies, not by reading the weight: dequantizing the weight
# once (0.2 ms at the 27B's gate_up) and running cuBLAS's half GEMM beats the in-tile dequantization (352 against
# ~550 TFLOP/s at 16,384 rows, an H200); a decode step's few rows are bound by the weight's bytes, which the W4A16
# GEMM reads as four bits. The scoring launch sizes are all above it (the smallest is a quarter of the budget).
DEQUANTIZED_ROWS = 1024


class Int4Linear:
    """packed: [K / 8, N] int32, scales: [K / G, N], zeros: [K / G, N] (same dtype as scales) or None."""

    def __init__(self, scheme: Scheme | str, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                 group: int):
        self.scheme = scheme_named(scheme) if isinstance(scheme, str) else scheme
        K = packed.shape[0] * 8
        if packed.dtype != torch.int32 or K % group or scales.shape != (K // group, packed.shape[1]) \
                or (zeros is not None and zeros.shape != scales.shape):
            raise ValueError(f"w4a16: packed [K/8, N] int32 and scales [K/G, N] (G {group}) expected; got "
                             f"{tuple(packed.shape)} {packed.dtype} and {tuple(scales.shape)}")
        self.packed, self.scales, self.zeros, self.group = packed, scales, zeros, group
        self._dequantized: torch.Tensor | None = None  # [N, K] float32, the CPU reference's weight

    @classmethod
    def from_checkpoint(cls, scheme: Scheme | str, tensors: dict[str, torch.Tensor], group: int) -> "Int4Linear":
        """From a module's compressed-tensors tensors (weight_packed, weight_scale, optional weight_zero_point)."""
        from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

        packed, scale = tensors["weight_packed"], tensors["weight_scale"]
        N = packed.shape[0]
        zeros = tensors.get("weight_zero_point")
        if zeros is not None:
            zeros = unpack_from_int32(zeros, 4, torch.Size((N, scale.shape[1])), packed_dim=0)  # [N, K / G] int8
            zeros = zeros.to(scale.dtype).t().contiguous()
        return cls(scheme, packed.t().contiguous(), scale.t().contiguous(), zeros, group)

    @classmethod
    def from_integers(cls, scheme: Scheme | str, q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None,
                      group: int) -> "Int4Linear":
        """q: [N, K] int8 in [-8, 7], scale (and zero): [N, K / G] -> the layer (what GPTQ hands over)."""
        from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

        zeros = None if zero is None else zero.to(scale.dtype).t().contiguous()
        return cls(scheme, pack_to_int32(q, 4).t().contiguous(), scale.t().contiguous(), zeros, group)

    # ---- what a stack reads ---------------------------------------------------------------------------------

    @property
    def shape(self) -> torch.Size:
        """The weight's logical shape [N, K]."""
        return torch.Size((self.packed.shape[1], self.packed.shape[0] * 8))

    @property
    def device(self) -> torch.device:
        return self.packed.device

    def tensors(self) -> dict[str, torch.Tensor]:
        """The stored tensors by their compressed-tensors suffix."""
        from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

        out = {"weight_packed": self.packed.t().contiguous(), "weight_scale": self.scales.t().contiguous(),
               "weight_shape": torch.tensor(tuple(self.shape), device=self.packed.device)}  # beside the rest
        if self.zeros is not None:
            out["weight_zero_point"] = pack_to_int32(self.zeros.t().to(torch.int8).contiguous(), 4, packed_dim=0)
        return out

    def to(self, device: torch.device | str | None = None) -> "Int4Linear":
        if device is None or self.packed.device == torch.device(device):
            return self
        zeros = None if self.zeros is None else self.zeros.to(device)
        return Int4Linear(self.scheme, self.packed.to(device), self.scales.to(device), zeros, self.group)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight as floats [N, K]: (q - zero) * scale in float32 (exact), rounded once to `dtype`."""
        return dequantize_packed(self.packed, self.scales, self.zeros, self.group, dtype).contiguous()

    # ---- fusing q/k/v and gate/up ---------------------------------------------------------------------------

    @classmethod
    def cat(cls, parts: list["Int4Linear"]) -> "Int4Linear":
        """The parts' outputs stacked (along N) as one layer; they must share scheme, group and zero points."""
        first = parts[0]
        if any(p.scheme != first.scheme or p.group != first.group or (p.zeros is None) != (first.zeros is None)
               for p in parts):
            raise ValueError("cannot fuse int4 layers of different schemes, group sizes or zero points")
        zeros = None if first.zeros is None else torch.cat([p.zeros for p in parts], dim=1)
        return cls(first.scheme, torch.cat([p.packed for p in parts], dim=1),
                   torch.cat([p.scales for p in parts], dim=1), zeros, first.group)

    def split(self, sizes: tuple[int, ...]) -> tuple["Int4Linear", ...]:
        """Views of this layer's output channels, one per size (the inverse of `cat`, sharing storage)."""
        packed, scales = self.packed.split(sizes, dim=1), self.scales.split(sizes, dim=1)
        zeros = self.zeros.split(sizes, dim=1) if self.zeros is not None else (None,) * len(sizes)
        return tuple(Int4Linear(self.scheme, p, s, z, self.group) for p, s, z in zip(packed, scales, zeros))

    # ---- the product ----------------------------------------------------------------------------------------

    def __call__(self, x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        """x: [M, K] in any float dtype -> [M, N] in `out_dtype`. On CUDA, a half x of at least DEQUANTIZED_ROWS
        rows (a scoring pass: every launch size is) multiplies the weight dequantized in one pass by cuBLAS, as a
        half layer of this shape does; fewer rows (a decode step) or a float32 x, the W4A16 GEMM, which reads the
        four bits in its tiles. Each launch size takes one way, so a row's result depends on that row alone at every
        size the start-up check accepts (it checks these products as it checks a half layer's)."""
        if x.is_cuda:
            from spinfc.backend.kernels.int4_matmul import w4a16_matmul

            if x.shape[0] >= DEQUANTIZED_ROWS and x.dtype in (torch.float16, torch.bfloat16):
                from spinfc.backend.kernels.int4_dequantize import dequantize

                weight = dequantize(self.packed, self.scales, self.zeros, self.group, x.dtype)  # [N, K], per call
                return F.linear(x, weight).to(out_dtype)
            return w4a16_matmul(x, self.packed, self.scales, self.zeros, self.group, out_dtype)
        return self.reference(x, out_dtype)

    def reference(self, x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        """The dequantized reference: x @ dequantize()^T in float32."""
        if self._dequantized is None or self._dequantized.device != x.device:
            self._dequantized = self.dequantize(torch.float32)
        return F.linear(x.float(), self._dequantized).to(out_dtype)
