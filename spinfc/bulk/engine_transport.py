"""The engine in this process: the one place the bulk job touches `spinfc.runtime.engine`.

A batch is one program (the texts as contents, the question set's queries and packs' queries, as the server's
/v1/score builds it with `add_packs`), compiled with the server's default limits, scored in the engine's shared
passes. Several batches may be in flight at once: the engine packs their contents into the same passes. A row's
media (bulk/media.py, read already) follow its text in its content and are read by the model's towers, checked
against the media limits of `media_policy`, as the server reads a request's media.
"""

from __future__ import annotations

import asyncio

import attrs

from spinfc.bulk.errors import BulkError, Rejected
from spinfc.bulk.questions import QuestionSet
from spinfc.bulk.transport import ContentResult, RowContent, text_and_media
from spinfc.config import Limits
from spinfc.errors import CompileError
from spinfc.frontend import program_from_request
from spinfc.ir.nodes import Content, MediaPiece


class EngineTransport:
    def __init__(self, questions: QuestionSet, *, device: str | None = None, dtype: str | None = None,
                 token_budget: int | None = None, limits: Limits | None = None, load_model=None, media_policy=None):
        from spinfc.config import EngineSettings

        self.questions = questions
        self.load_model = load_model  # (name, dtype, device) -> Model, as `create_app`'s; None: the model's files
        self.settings = EngineSettings(model=questions.model, device=device, dtype=dtype, token_budget=token_budget)
        self.limits = limits or Limits()
        self.media_policy = media_policy  # spinfc.media.MediaPolicy: the server's default when None
        self.model = questions.model
        self.fingerprint = ""
        self.engine = None

    async def start(self) -> None:
        """Load the model and start the engine; score one short text, so the questions' floor is cached and a
        question the engine refuses stops the job before any work (BulkError)."""
        self.engine, self.fingerprint = await asyncio.to_thread(start_engine, self.settings, self.load_model,
                                                                self.media_policy)
        from spinfc.runtime.request_packs import add_packs

        body = {"messages": [{"role": "user", "content": "-"}],
                "scoring": {"queries": list(self.questions.queries)},
                "packs": [{"id": p.id} for p in self.questions.packs]}
        self.plan = add_packs(program_from_request(body, model=self.model), self.questions.packs)
        try:  # the floor and the first pass's set-up are paid here, as the HTTP transport does
            await self.score(["Hello."])
        except Rejected as error:
            raise BulkError(f"the engine refuses these questions: {error.code}: {error.message}") from None

    async def score(self, texts: list[str | RowContent]) -> list[ContentResult]:
        from spinfc.runtime.engine import PassFailed, Refused
        from spinfc.runtime.limits import check_limits, check_prompts
        from spinfc.runtime.request_packs import split_results

        plan = self.plan
        program = attrs.evolve(plan.program, contents=tuple(_content(i, item) for i, item in enumerate(texts)))
        try:
            check_prompts(program, self.limits)
            compiled = await self.engine.compile_program_async(
                program, check=lambda p: check_limits(p, self.limits, True, where=plan.where))
            scored = await self.engine.score(compiled)
        except CompileError as error:
            raise Rejected(error.code, error.message) from None
        except Refused as error:
            raise Rejected(error.code, error.message) from None
        except PassFailed as error:
            raise Rejected("pass_failed", str(error)) from None
        per_input = await asyncio.to_thread(scored.results)
        return [ContentResult(*split_results(results, plan)) for results in per_input]

    async def close(self) -> None:
        if self.engine is not None:
            await asyncio.to_thread(self.engine.close)


def _content(i: int, item: str | RowContent) -> Content:
    text, media = text_and_media(item)
    return Content(f"input-{i}", text, media=tuple(MediaPiece(len(text), source) for source in media))


def start_engine(settings, load_model=None, media_policy=None):
    """The engine `spinfc serve` would run for `settings` (the same model loading, precision, pass shapes and CUDA
    graph, so the same numbers and fingerprint), started; returns (engine, fingerprint). `load_model` replaces the
    loading of the model's files, as `create_app(load_model=...)` does for a server (benchmarks/gpu_bulk.py). The
    model's towers read media under `media_policy` (the server's default policy when None)."""
    from spinfc.backend import serving
    from spinfc.media import MediaPolicy
    from spinfc.runtime.towers import MediaReader
    from spinfc.runtime.engine import Engine
    from spinfc.runtime.fingerprint import fingerprint
    from spinfc.runtime.loader import load_default
    from spinfc.shapes import Shapes

    device = settings.resolved_device()
    shapes = Shapes.for_device(device, settings.resolved_budget(), settings.block, settings.pass_sizes)
    model = (load_model or load_default)(settings.model, settings.resolved_precision(), device)
    engine_fingerprint = fingerprint(model, device)
    tokenizer = model.tokenizer
    if device.startswith("cuda"):
        model, shapes = serving.graph_model(model, shapes)
    media = MediaReader(getattr(model, "towers", None), media_policy or MediaPolicy(), tokenizer, settings.model)
    return Engine(model, shapes, device=device, tokenizer=tokenizer, media=media).start(), engine_fingerprint
