"""What every family's stack must do with a forward context (issue 35, item 2): a forward leaves the stack as it
found it (what one forward carries lives in its `ForwardContext`, not on the model), and a forward that keeps its
keys and values scores what the plain forward scores. Run by each family's parity module on its random pair."""

from __future__ import annotations

import torch

from spinfc.runtime.extract.kv import forward_keeping_kv
from spinfc.runtime.models.decode import KVCache


def attributes(model) -> dict[str, int]:
    """Every attribute of the stack, by the identity of its value."""
    return {name: id(value) for name, value in vars(model).items()}


def check_forward_context(model, launch) -> None:
    before = attributes(model)
    plain = model.forward(launch)
    assert attributes(model) == before, "a forward left state on the stack"
    kept, keys, values = forward_keeping_kv(model, launch)
    assert attributes(model) == before, "a forward keeping its keys and values left state on the stack"
    assert torch.equal(kept, plain)
    assert len(keys) == len(values) == model.attention_layers
    assert all(k.shape[0] == launch.budget for k in keys)
    cache = KVCache(model.config.layers)
    model.decode(launch.tokens[:5], cache)
    model.decode(launch.tokens[5:6], cache)
    assert attributes(model) == before, "a generation step left state on the stack"
    assert cache.length == 6
