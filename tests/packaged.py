"""The packaged models (gemma3-270m, smollm2-135m), each loaded once per test session and shared: spinfc's stack
(`load_shared`) and transformers' model of the same GGUF file (`load_reference`, what parity tests compare with).

A server test passes `load_model=load_shared` to `create_app` (or wraps it, as server/live.py's `pausable_loader`
does); a test that runs a packaged model in-process takes the `packaged_model` or `reference_model` fixture
(tests/conftest.py). Each load costs seconds of CPU (transformers dequantizes the GGUF file) and up to ~1 GB; a suite
that starts some twenty servers on gemma3-270m and compares five modules with transformers pays each once.
The session keeps what it loaded (about 3 GB with both stacks and both references) until it ends.

Shared means read-only: serving never changes a loaded stack (the engine and the generator wrap it, they do not
mutate it), so servers started one after another, or side by side, can share one. A test that changes a model
(its weights, its ops, an attribute set on it) loads its own with `spinfc.runtime.load.loader.load_model`.
Only these names are shared: any other name (a random model written to a test's directory) loads fresh, since
one path can hold different weights in different tests.
"""

from __future__ import annotations

import threading

import torch

from spinfc.runtime.load.loader import load_default
from spinfc.runtime.load.precision import Precision

PACKAGED = ("gemma3-270m", "smollm2-135m")

_loaded: dict[tuple, object] = {}
_lock = threading.Lock()  # two servers of one test may start side by side, each on its own thread


def load_shared(name: str, dtype=None, device: str = "cpu", media: bool = True):
    """`load_default`'s signature (what `create_app(load_model=...)` calls; `dtype` None: float32): a packaged model
    from the session's cache (loaded on first use), any other name loaded fresh."""
    if name not in PACKAGED:
        return load_default(name, dtype, device, media=media)
    key = (name, Precision.of(dtype), device, media)
    with _lock:
        if key not in _loaded:
            _loaded[key] = load_default(name, dtype, device, media=media)
        return _loaded[key]


def load_reference(name: str):
    """transformers' model of the packaged `name` (its GGUF file, float32, eager attention), in eval mode: loaded on
    first use, then shared."""
    from transformers import AutoModelForCausalLM

    from spinfc.registry import resolve

    assert name in PACKAGED, f"{name} is not a packaged model ({', '.join(PACKAGED)})"
    key = ("transformers", name)
    with _lock:
        if key not in _loaded:
            gguf = resolve(name).gguf
            _loaded[key] = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager").eval()
        return _loaded[key]
