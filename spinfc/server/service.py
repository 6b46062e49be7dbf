"""The server's state, one object per app: its config, the model's loading status, and the engine once it runs.

Loading happens in the app's lifespan as a background task, so /healthz answers while weights load:

    loading  -> resolve the model name; `runtime.start.start_engine` (on a thread) loads the weights
    warming  -> ... on CUDA compiles every kernel and captures the pass's CUDA graphs (`backend.serving`), and
                starts the engine; then one warm-up pass
    ready    -> /readyz 200, /v1/score runs
    failed   -> /readyz 503 model_failed, with the reason; the log has the traceback

The service also holds what the server preloads or counts: the enabled packs (read before the app starts, so a
pack source that cannot be read refuses the start), the admission of requests (queue, drain), the shutdown clock
(shutdown.py), the kept streams (streams/) and the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable

import attrs

from spinfc import __version__
from spinfc.config import Settings
from spinfc.errors import BadModelFiles
from spinfc.media import MediaPolicy
from spinfc.metrics import Metrics
from spinfc.packsrc import PackRegistry
from spinfc.packsrc.calibrated import stale_calibrations
from spinfc.registry import ModelNotFound, ModelSource, resolve
from spinfc.runtime.admit.generator import Generator
from spinfc.runtime.admit.limits import limits_that_hold
from spinfc.runtime.admit.prechecks import model_longest_token
from spinfc.runtime.engine import Engine
from spinfc.runtime.load.loader import load_default
from spinfc.runtime.load.memory import MemoryTooSmall
from spinfc.runtime.load.precision import resolved_precision
from spinfc.runtime.schedule.scheduler import DECODE_ROW_COST
from spinfc.runtime.start import start_engine
from spinfc.runtime.weights.config import UnsupportedModel
from spinfc.server.admission import Admission
from spinfc.server.errors import ApiError
from spinfc.server.shutdown import Shutdown, on_daemon_thread
from spinfc.server.streams import StreamRegistry
from spinfc.shapes import Shapes

# How long a thread holding the GIL keeps it while another waits (Python's default: 5 ms). Each of the CUDA calls
# that launch a pass gives the GIL up and takes it back; with requests parsed and compiled on other threads, 5 ms
# per take-back put tens of milliseconds between a compiled pass and its launch. Measured on one H200 (the served
# benchmark, benchmarks/NOTES.md): at 0.1 ms against 0.5 ms, the requests of a burst reached the app sooner (its
# first at 8 ms against 18) and no pattern was slower.
SWITCH_SECONDS = 0.0001

log = logging.getLogger("spinfc.server")
# a searched slot ended by a character and one with nothing after it (a newline): the two kinds of token table
EXTRACTION_WARMUP = {"messages": [{"role": "user", "content": "Order 12 shipped in May."}], "scoring": {"queries": [
    {"id": "month", "template": "\n\nQ: Which month?\nA: \"<*>\"", "max_tokens": 2, "beam_width": 1},
    {"id": "order", "template": "\n\nQ: Which order?\nA: <n>", "max_tokens": 2, "beam_width": 1}]}}


class Service:
    def __init__(self, settings: Settings, load_model: Callable = load_default, packs: PackRegistry | None = None,
                 metrics: Metrics | None = None):
        self.settings = settings
        self.packs = packs if packs is not None else PackRegistry(settings.engine.model, {})
        self.metrics = metrics or Metrics()
        self.admission = Admission(settings.server.queue, settings.server.max_queued_tokens)
        self.shutdown = Shutdown(settings.server.shutdown_timeout)  # started by the first SIGTERM/SIGINT
        server = settings.server  # streams sent with X-Conversation-Id, for a reconnect or a cancel
        self.streams = StreamRegistry(server.stream_count, server.stream_bytes, server.stream_ttl)
        self.status = "loading"
        self.error: str | None = None
        self.engine: Engine | None = None
        self.generator: Generator | None = None  # the routes' side of generations (the engine steps them)
        self.source: ModelSource | None = None
        self.created = int(time.time())
        self.fingerprint = ""
        self.longest_token: int | None = None  # characters one token covers at most (runtime/admit/prechecks.py)
        self._load_model = load_model
        self.media = None  # towers.MediaReader, once the model is loaded
        self._task: asyncio.Task | None = None
        self.on_failed: Callable[[], None] | None = None  # `spinfc serve`: stop the server (it exits 2)

    # ---- what routes ask ----------------------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The name responses carry: the first --served-model-name, else the model's own name."""
        served = self.settings.engine.served_model_name
        if served:
            return served[0]
        return self.source.name if self.source else self.settings.engine.model

    @property
    def aliases(self) -> list[str]:
        """Other names a request's `model` may give: the other served names, the model's own name and aliases."""
        own = [self.source.name, *self.source.aliases] if self.source else [self.settings.engine.model]
        names = [*self.settings.engine.served_model_name[1:], *own]
        return [name for name in dict.fromkeys(names) if name != self.model_name]

    @property
    def draining(self) -> bool:
        return self.admission.draining

    def ready_engine(self) -> Engine:
        """The engine, or a 503 saying why there is none yet."""
        if self.status == "ready" and self.engine is not None:
            return self.engine
        if self.status == "failed":
            raise ApiError(503, "model_failed", f"the model {self.settings.engine.model!r} failed to load: {self.error}")
        raise ApiError(503, "warming_up", f"the model {self.settings.engine.model!r} is {self.status}; poll GET /readyz "
                       "and send work once it answers 200", headers={"Retry-After": "5"})

    def check_model(self, requested: str | None) -> None:
        """A request's `model` must be omitted, the served name, an alias, or the name the server was started with."""
        served = {self.model_name, self.settings.engine.model, *self.aliases}
        if requested is not None and requested not in served:
            raise ApiError(400, "model_not_served", f"this server serves {self.model_name!r} (also called "
                           f"{', '.join(sorted(served - {self.model_name})) or 'nothing else'}), not {requested!r}: "
                           "send one of those names or omit `model`", param="model")

    def work_ahead(self, kind: str, cost: int) -> tuple[int, float | None]:
        """The work queued ahead of a request in the engine's and the generator's fair schedules, in pass rows
        (admission.py), and the measured pass rate. `kind`: "score", "extract" (all the extraction decode queued is
        counted ahead: on CUDA passes' decodes run one after another; where they take turns this is an upper bound) or "generate" (generations take turns: at most `cost` tokens of each other
        one, and of the extraction decode, which takes turns with them on the model)."""
        stats = self.engine.stats
        rows, rate = stats.queued_tokens, stats.rate
        if kind == "score":
            return rows, rate
        turns = self.generator.queued_turns() if self.generator is not None else []
        generated = sum(min(left, cost) for left in turns)
        extracted = stats.queued_decode if kind == "extract" else min(stats.queued_decode, cost)
        return rows + DECODE_ROW_COST * (generated + extracted), rate

    # ---- start and stop -----------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _app) -> AsyncIterator[None]:
        self.shutdown.bind(asyncio.get_running_loop())
        self._task = asyncio.create_task(self._start(), name="spinfc-load-model")
        try:
            yield
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self.streams.close()
            if self.generator is not None:
                self.generator.close()
            if self.engine is not None:  # waits for the pass in flight; a forced exit (cancelled) does not
                with contextlib.suppress(asyncio.CancelledError):
                    closing = on_daemon_thread(self.engine.close)
                    if self.shutdown.forced:  # a second signal: its requests are answered, the pass is not awaited
                        asyncio.ensure_future(closing)
                    else:
                        await closing

    def _hold_limits(self, shapes: Shapes) -> None:
        """Serve a content limit a content can meet: lowered (with a warning saying what to raise) where a content
        at `max_content_tokens` and one question would not fit the largest pass (runtime/admit/limits.py)."""
        limits = self.settings.limits
        held = limits_that_hold(limits, shapes.largest)
        if held != limits:
            need = limits.max_content_tokens + limits.max_query_tokens + limits.max_option_tokens
            log.warning("--max-content-tokens %d does not fit one pass (%s) with a question: serving "
                        "max_content_tokens %d; start with --token-budget %d or more to serve %d",
                        limits.max_content_tokens, shapes, held.max_content_tokens,
                        -(-need // shapes.block) * shapes.block, limits.max_content_tokens)
            self.settings = attrs.evolve(self.settings, limits=held)

    async def _start(self) -> None:
        config = self.settings.engine
        try:
            device = config.resolved_device()
            # a budget or block the kernels cannot run fails here, naming the flag, before the model loads; the
            # limits served are ones a content can meet in the largest pass
            self._hold_limits(Shapes.for_settings(config))
            started = time.perf_counter()
            log.info("loading %s on %s (%s; on a first start the weights are unpacked and converted, which can "
                     "take a minute on a CPU)", config.model, device, resolved_precision(config).name())
            self.source = await asyncio.to_thread(resolve, config.model)

            def loaded(model, engine_fingerprint: str) -> None:  # on start_engine's thread, before the capture
                self.fingerprint = engine_fingerprint
                log.info("loaded %s on %s (%s) in %.1f s", self.source.name, device, self.fingerprint,
                         time.perf_counter() - started)
                for warning in stale_calibrations((e.pack for e in self.packs.enabled.values()), self.fingerprint):
                    log.warning("%s", warning)
                log.info("reading the tokenizer (a GGUF vocabulary is converted once and cached: ~15 s for Gemma 3)")
                try:  # for the cheap limits before tokenizing (prechecks.py); without it they count tokens only
                    self.longest_token = model_longest_token(self.source.name)
                except Exception as error:  # noqa: BLE001
                    log.warning("no character bound on the token limits: %s", error)
                self.metrics.set_info(version=__version__, model=self.source.name, device=device,
                                      fingerprint=self.fingerprint)
                self.status = "warming"

            running = await asyncio.to_thread(
                start_engine, config, load_model=self._load_model, towers=self.settings.features.towers_loaded,
                media_policy=MediaPolicy.of(self.settings.features, self.settings.limits), media_name=self.model_name,
                generation=True, extraction=self.settings.features.extraction, on_pass=self.metrics.observe_pass,
                on_loaded=loaded)
            if device.startswith("cuda"):  # the engine's worker hands the GPU its next pass while other threads
                sys.setswitchinterval(SWITCH_SECONDS)  # parse and compile requests: it gets the GIL back within this
            self.engine, self.generator, self.media = running.engine, running.generator, running.media
            shapes = running.shapes
            self.metrics.watch_content_cache(self.engine.contents.cache)
            self.admission.bind(self.work_ahead, shapes.budget)
            if config.warmup != "none":
                log.info("warming up: one small pass (%s tokens a pass), so the first request does not pay for it",
                         shapes.budget)
                started = time.perf_counter()
                await self.engine.warm_up()
                log.info("warm-up pass done in %.1f s", time.perf_counter() - started)
                if self.settings.features.extraction and not self.engine.codes:  # a decision model extracts nothing
                    log.info("warming up extraction: the grammars' token tables of this tokenizer (once a server)")
                    started = time.perf_counter()
                    await self.engine.score(await self.engine.compile_async(EXTRACTION_WARMUP))
                    log.info("extraction warm-up done in %.1f s", time.perf_counter() - started)
            else:
                log.info("--warmup none: the first request pays for the first pass (and the first extraction "
                         "for the grammars' token tables)")
            # What start-up made (the model's modules, the libraries' objects: ~480k) lives as long as the server.
            # Frozen out of the collector, a full collection then scans only what requests have made since, rather
            # than stopping every thread (the worker launching passes included) for ~210 ms (an H200's host).
            gc.collect()
            gc.freeze()
            self.status = "ready"
        except asyncio.CancelledError:
            raise
        except (BadModelFiles, ModelNotFound, UnsupportedModel, MemoryTooSmall) as error:  # said in full by them
            self.status, self.error = "failed", str(error)
            log.error("the model could not be loaded: %s", error)
        except Exception as error:
            self.status, self.error = "failed", f"{type(error).__name__}: {error}"
            log.exception("the model could not be loaded or warmed up")
        if self.status == "failed" and self.on_failed is not None:
            self.on_failed()


try:  # Litestar >= 2.23 wants injected parameters marked; older versions infer them
    from litestar.di import NamedDependency

    ServiceDep = NamedDependency[Service]
except ImportError:  # pragma: no cover
    ServiceDep = Service
