"""Gemma 3: its config (config.py), its text stack (stack.py) and its vision tower (towers.py)."""

from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.gemma3.config import GGUF, Gemma3Config, read_config
from spinfc.runtime.models.gemma3.stack import Gemma3Model
from spinfc.runtime.models.gemma3.towers import gemma3_towers

FAMILY = FamilySpec(read_config=read_config, stack=Gemma3Model, config=Gemma3Config, towers=gemma3_towers,
                    decision_types=("gemma3_text", "gemma3"), gguf=GGUF)

__all__ = ["FAMILY", "Gemma3Config", "Gemma3Model"]
