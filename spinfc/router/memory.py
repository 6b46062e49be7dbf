"""What a model takes in memory: estimated from its weights before its first load, measured after it.

The estimate counts the checkpoint's parameters (GGUF tensor sizes, or the safetensors headers) at the bytes the
model computes in (4 on the CPU, float32; 2 on CUDA, half precision by default). The measure is the change in the
process's resident memory (CPU) or in torch's allocated device memory (CUDA) across the load.
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import os
import struct
from pathlib import Path

from spinfc.registry import resolve

OVERHEAD = 1.15  # activations, staging buffers and the tokenizer beside the weights


def in_use(device: str) -> int:
    """Bytes in use now on `device`: torch's allocated memory on CUDA, the process's resident set elsewhere."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.memory_allocated(torch.device(device)))
    return resident_bytes()


def resident_bytes() -> int:
    """The process's resident set size, in bytes (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def give_back(device: str) -> None:
    """Return freed memory to the system: a full collection, the CUDA cache, and glibc's free lists. A server frees
    what start-up made from the collector once it is ready (`gc.freeze`, service.py), so an unloaded model's cycles
    are in the frozen generation: thawed, collected, and what is left frozen again."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def estimate(model: str, device: str) -> int | None:
    """Bytes the named model should take on `device`, from its parameter count; None when it cannot be read
    without loading it (a Hub name not in the cache)."""
    try:
        source = resolve(model)
        if source.gguf is not None:
            params = _gguf_parameters(source.gguf)
        elif source.directory is not None:
            params = sum(_safetensors_parameters(path) for path in Path(source.directory).glob("*.safetensors"))
        else:
            return None
    except Exception:  # noqa: BLE001  (an estimate only: the load itself reports what is wrong)
        return None
    per_parameter = 2 if device.startswith("cuda") else 4
    return int(params * per_parameter * OVERHEAD) if params else None


def _gguf_parameters(path: Path) -> int:
    from gguf import GGUFReader

    return sum(int(tensor.n_elements) for tensor in GGUFReader(str(path)).tensors)


def _safetensors_parameters(path: Path) -> int:
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    return sum(math.prod(entry["shape"]) for key, entry in header.items() if key != "__metadata__")
