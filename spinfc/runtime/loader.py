"""`load_model`: a model name (see `spinfc.registry`) to a ready stack, weights on the device in the dtype asked."""

from __future__ import annotations

import torch

from spinfc import registry
from spinfc.runtime.models import Model, build_model
from spinfc.runtime.weights import load_gguf, read_snapshot, snapshot_hash


def load_model(
    name: str | None, *, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu", ops=None
) -> Model:
    """Load the named model (None: the default), from its GGUF file (dequantized; cached as safetensors after the
    first load) or its safetensors snapshot (a directory, or a Hub id through the offline cache).

    `ops` is the op backend (default: the PyTorch reference, `spinfc.backend.reference`). Raises
    `registry.ModelNotFound` for a name that resolves to nothing and `UnsupportedModel` for an architecture or
    feature the stacks do not implement, each saying what to do."""
    source = registry.resolve(name)
    if source.gguf is not None:
        config, state, weights_hash = load_gguf(source.gguf)
    else:
        directory = registry.snapshot_directory(source)
        config, state = read_snapshot(directory)
        weights_hash = snapshot_hash(directory)
    return build_model(
        config, state, ops=ops, name=source.name, weights_hash=weights_hash, dtype=dtype, device=device
    )
