"""Qwen3.5, dense and MoE: its config (config.py, and the renaming of a multimodal checkpoint's weights), its
text stack of Gated DeltaNet and gated full-attention layers (stack.py), and its vision tower (towers.py, video.py).
"""

from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.qwen3_5.config import Experts, LinearAttention, Qwen3_5Config, read_config
from spinfc.runtime.models.qwen3_5.stack import Qwen3_5Model
from spinfc.runtime.models.qwen3_5.towers import qwen3_5_towers

FAMILY = FamilySpec(
    read_config=read_config, stack=Qwen3_5Model, config=Qwen3_5Config, towers=qwen3_5_towers, recurrent=True,
    decision_types=("qwen3_5", "qwen3_5_text"),
    smoothing_refused="smoothing is not implemented for Qwen3.5 (its Gated DeltaNet layers read their norm through "
                      "other projections, and a MoE block's router reads what its experts do): quantize it without "
                      "--smoothing",
)

__all__ = ["FAMILY", "Experts", "LinearAttention", "Qwen3_5Config", "Qwen3_5Model"]
