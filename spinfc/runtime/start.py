"""`start_engine(settings)`: the one place an engine is built. `spinfc serve` (server/service.py, and through it each
model of the router), `spinfc score` (bulk/engine_transport.py) and `spinfc parity` (runtime/parity.py) all start
theirs here, so each runs the same model loading, precision, pass shapes and CUDA graphs: the same numbers under
the same fingerprint.

    load      the model's files (`load_default`: the Triton ops on CUDA, the PyTorch reference elsewhere)
    capture   on CUDA: every launch size checked, compiled and captured as a CUDA graph (`backend.serving`),
              and, when asked, the extraction decode's launches
    start     the engine's worker (and the generator's, for a server that generates), the media reader

What comes back is a value: the running engine, what it runs, and `stop()`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

from spinfc.backend import serving
from spinfc.config import EngineSettings
from spinfc.media import MediaPolicy
from spinfc.runtime.admit.generator import Generator
from spinfc.runtime.engine import Engine
from spinfc.runtime.extract import step
from spinfc.runtime.extract.fixed import pool_tokens
from spinfc.runtime.load.fingerprint import fingerprint
from spinfc.runtime.load.loader import load_default
from spinfc.runtime.load.memory import Limit
from spinfc.runtime.load.precision import resolved_precision
from spinfc.runtime.towers import MediaReader
from spinfc.shapes import Shapes

log = logging.getLogger("spinfc.engine")


@attrs.define
class RunningEngine:
    engine: Engine
    model: object  # the stack the engine runs: a GraphedModel on CUDA
    shapes: Shapes  # the pass shapes, as captured
    device: str
    fingerprint: str  # of the loaded model on `device` (runtime/load/fingerprint.py)
    media: object  # towers.MediaReader: the model's towers under the media policy
    generator: object | None = None  # runtime.generator.Generator, when started with `generation`

    def stop(self) -> None:
        """Stop the generator (its unfinished generations end Cancelled), then the engine after its pass in
        flight (requests still waiting fail with EngineClosed)."""
        if self.generator is not None:
            self.generator.close()
        self.engine.close()


def start_engine(settings: EngineSettings, *, load_model: Callable = load_default, towers: bool = True,
                 media_policy=None, media_name: str | None = None, generation: bool = False,
                 extraction: bool = False, on_pass: Callable | None = None,
                 on_loaded: Callable | None = None) -> RunningEngine:
    """The engine `settings` describe, started (blocking: call it on a thread from async code).

    `load_model(name, precision, device)` loads the stack (with `media=False` when `towers` is False: --no-media);
    `media_policy` (spinfc.media.MediaPolicy; default: the server's default policy) bounds what the towers read,
    and `media_name` is the model's name in their errors (default `settings.model`). `generation`: also a
    Generator, which shares the model with the engine (passes and generated tokens take turns). `extraction`: on
    CUDA, capture the extraction decode's launches too, so no request pays for them. `on_pass` is the engine's
    per-pass callback (metrics). `on_loaded(model, fingerprint)` is called once the weights are loaded, before
    anything is captured (a server reports its progress)."""
    device = settings.resolved_device()
    # a budget or block the kernels cannot run fails here, naming the flag
    shapes = Shapes.for_settings(settings)
    limit = None if settings.max_memory is None else Limit(settings.max_memory, device, shapes.budget, shapes.block)
    # On CUDA: the Triton ops (fp16 matmuls around a float32 residual stream unless set otherwise), every pass at one
    # of a few fixed launch sizes, each replayed from a CUDA graph.
    model = load_model(settings.model, resolved_precision(settings), device, **({} if towers else {"media": False}))
    stack = model
    if limit is not None:  # refused here, before the capture, where the weights, K/V and state alone do not fit
        decodes = extraction and not getattr(model, "codes", ())  # the decode's pools are made at start (warm_up)
        limit.loaded(stack, shapes.budget + (pool_tokens(stack, shapes.budget) if decodes else 0))
    engine_fingerprint = fingerprint(model, device)
    if on_loaded is not None:
        on_loaded(model, engine_fingerprint)
    if device.startswith("cuda"):  # check, compile and capture every launch size
        started = time.perf_counter()
        model, shapes = serving.graph_model(model, shapes)
        log.info("captured the pass (%s) in %.1f s", shapes, time.perf_counter() - started)
        if extraction and not getattr(model, "codes", ()):  # a decision model's head reads codes: nothing decodes
            started = time.perf_counter()
            step.warm_up(model, shapes.budget)
            log.info("captured the extraction decode in %.1f s", time.perf_counter() - started)
    tokenizer = model.tokenizer
    media = MediaReader(getattr(model, "towers", None), media_policy or MediaPolicy(), tokenizer,
                        media_name or settings.model)
    room = None if limit is None else limit.started(stack)  # refused where the workspaces take it past the limit
    engine = Engine(model, shapes, device=device, tokenizer=tokenizer, on_pass=on_pass, media=media,
                    content_cache_tokens=settings.content_cache_tokens, content_cache_room=room).start()
    generator = None
    if generation:  # generations are the engine's work too: they take turns with its passes
        generator = Generator(engine)
    return RunningEngine(engine, model, shapes, device, engine_fingerprint,
                         media, generator)
