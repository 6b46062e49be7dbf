"""Weights and model configs from GGUF files (dequantized, cached as safetensors) and Hugging Face snapshots.

The names below are looked up when first asked for: the readers go through the family table
(`runtime/models/families.py`), which itself reads `weights.config`, so importing this package imports neither."""

from __future__ import annotations

import importlib

_WHERE = {"load_gguf": "cache", "ModelConfig": "config", "UnsupportedModel": "config", "read_snapshot": "snapshot",
          "snapshot_hash": "snapshot", "CorruptWeights": "whole"}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = sorted(_WHERE)
