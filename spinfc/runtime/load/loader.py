"""`load_model`: a model name (see `spinfc.registry`) to a ready stack, weights on the device in the dtype asked;
`load_default`: the same with the ops a server runs on that device."""

from __future__ import annotations

import torch

from spinfc import registry
from spinfc.runtime.load.precision import Precision
from spinfc.runtime.models import Model, build_model
from spinfc.runtime.quant.reading import is_quantized, read_quantized
from spinfc.runtime.towers import towers_of
from spinfc.runtime.weights import load_gguf, read_snapshot, snapshot_hash
from spinfc.runtime.weights.folder import hf_config, naming_files


def load_model(
    name: str | None, *, dtype: "torch.dtype | Precision" = torch.float32, device: torch.device | str = "cpu",
    ops=None, precision: Precision | None = None, media: bool = True,
) -> Model:
    """Load the named model (None: the default), from its GGUF file (dequantized; cached as safetensors after the
    first load), its safetensors snapshot (a directory, or a Hub id through the offline cache), or a quantized
    checkpoint in the compressed-tensors format (`spinfc quantize`, llm-compressor), whose linear layers run
    their W8A8 scheme.

    `precision` (default: `dtype` for everything, or `dtype` itself when it is a `Precision`) places each part
    of the stack (runtime/load/precision.py). `ops` is the op backend (default: the PyTorch reference,
    `spinfc.backend.reference`). Raises `registry.ModelNotFound` for a name that resolves to nothing and
    `UnsupportedModel` for an architecture or feature the stacks do not implement, each saying what to do.
    A multimodal snapshot's towers load beside the stack (`model.towers`) unless `media` is False (--no-media)."""
    precision = precision or Precision.of(dtype)
    source = registry.resolve(name)
    scheme = towers = None
    if source.gguf is not None:
        location = source.gguf
        config, state, weights_hash = load_gguf(source.gguf)
    else:
        location = directory = registry.snapshot_directory(source)
        hf = hf_config(directory)  # each file of the folder checked before any is read in full (weights/folder.py)
        if is_quantized(hf):
            config, state, scheme = read_quantized(directory)
        else:
            config, state = read_snapshot(directory, towers=True)
        weights_hash = snapshot_hash(directory)
        towers = towers_of(hf, state, directory, device=device, dtype=precision.compute, load=media)
    with naming_files(location):  # a tensor missing, of the wrong shape or of no use: the file that holds it
        model = build_model(config, state, ops=ops, name=source.name, weights_hash=weights_hash,
                            precision=precision, device=device, quant_scheme=scheme)
    if towers is not None:
        model.towers = towers
    return model


def load_default(name: str, dtype, device: str, media: bool = True):
    """The named model on `device` with `dtype` (a torch dtype, or a `Precision` placing each part): with the
    Triton ops on CUDA (what `serving.graph_model` captures), with the PyTorch reference ops elsewhere; its
    towers unless `media` is False (--no-media)."""
    if device.startswith("cuda"):
        from spinfc.backend import triton_ops  # Triton, the gpu extra: on CUDA only

        return load_model(name, dtype=dtype, device=device, ops=triton_ops, media=media)
    return load_model(name, dtype=dtype, device=device, media=media)
