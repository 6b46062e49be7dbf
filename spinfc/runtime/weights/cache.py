"""A GGUF file's dequantized weights, cached as safetensors under the spinfc cache, so that only the first start
pays for dequantizing (Gemma 3 270M: seconds to dequantize; the cached copy loads memory-mapped).

The copy is named by the GGUF file's path, size and modification time, and carries the config and the sha256 of
the GGUF file's contents in its metadata: a changed file gets a new copy, and the hash is read, not recomputed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from spinfc import registry
from spinfc.runtime.models.families import config_from_json
from spinfc.runtime.weights.config import ModelConfig
from spinfc.runtime.weights.gguf_file import read_gguf
from spinfc.runtime.weights.snapshot import file_digest
from spinfc.whole_files import CorruptWeights, check_safetensors

FORMAT = "spinfc-gguf-cache-1"  # bump when the conversion changes, so old copies are not reused


def cached_copy(gguf: Path) -> Path:
    stat = gguf.stat()
    identity = f"{FORMAT}:{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return registry.cache_dir() / "weights" / f"{gguf.stem}-{digest}.safetensors"


def _whole(copy: Path) -> bool:
    """Whether the cached copy is whole (one cut short by a full disk is converted again)."""
    try:
        check_safetensors(copy)
        return True
    except CorruptWeights:
        return False


def load_gguf(gguf: Path, *, use_cache: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor], str]:
    """(config, float32 state dict in Hugging Face naming, sha256 of the GGUF file) for a GGUF file.

    With `use_cache`, reads the cached copy when there is one and writes it when there is not (a failure to
    write, such as a read-only cache, only costs the next start the conversion again)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    copy = cached_copy(gguf)
    if use_cache and copy.is_file() and _whole(copy):
        with safe_open(str(copy), "pt") as handle:
            metadata = handle.metadata()
        if metadata.get("format") == FORMAT:
            return config_from_json(metadata["config"]), load_file(str(copy)), metadata["sha256"]
    config, state = read_gguf(gguf)
    sha256 = file_digest(gguf)
    if use_cache:
        tmp = copy.with_name(f"{copy.name}.tmp{os.getpid()}")
        try:
            copy.parent.mkdir(parents=True, exist_ok=True)
            save_file(state, str(tmp), metadata={"format": FORMAT, "config": config.to_json(), "sha256": sha256})
            tmp.replace(copy)
        except OSError:
            tmp.unlink(missing_ok=True)
    return config, state, sha256
