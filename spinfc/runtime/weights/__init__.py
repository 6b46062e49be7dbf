"""Weights and model configs from GGUF files (dequantized, cached as safetensors) and Hugging Face snapshots."""

from spinfc.runtime.weights.cache import load_gguf
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, from_hf
from spinfc.runtime.weights.snapshot import read_snapshot, snapshot_hash
from spinfc.runtime.weights.whole import CorruptWeights

__all__ = ["CorruptWeights", "ModelConfig", "UnsupportedModel", "from_hf", "load_gguf", "read_snapshot",
           "snapshot_hash"]
