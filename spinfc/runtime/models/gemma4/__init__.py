"""Gemma 4: its config (config.py: every option it adds to Gemma 3's), its text stack (stack.py, with its PLE and
MoE blocks in blocks.py) and its vision and audio towers (towers.py)."""

from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.gemma4.config import Gemma4Config, read_config, snapshot_weights
from spinfc.runtime.models.gemma4.stack import Gemma4Model, layer_weight_names
from spinfc.runtime.models.gemma4.towers import gemma4_towers

FAMILY = FamilySpec(
    read_config=read_config, stack=Gemma4Model, config=Gemma4Config, snapshot_weights=snapshot_weights,
    towers=gemma4_towers,
    smoothing_refused="smoothing is not implemented for Gemma 4 (its layers differ in head shape, reuse k as v and "
                      "share K/V): quantize it without --smoothing",
)

__all__ = ["FAMILY", "Gemma4Config", "Gemma4Model", "layer_weight_names"]
