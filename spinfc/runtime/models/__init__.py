"""Model stacks: what every family shares (base.py: `Model`; decode.py, experts.py, state_flow.py), and each
family's home, a file or a folder named in the family table (`runtime/models/families.py`). `build_model` builds the stack
a config's family names."""

from __future__ import annotations

from spinfc.runtime.models.families import build_model
from spinfc.runtime.models.base import Model

__all__ = ["Model", "build_model"]
