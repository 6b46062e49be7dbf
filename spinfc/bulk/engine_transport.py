"""The engine in this process (`spinfc.runtime.start.start_engine`, as `spinfc serve` starts its own): the one place
the bulk job touches the runtime's engine.

A batch is one program (the texts as contents, the question set's queries and packs' queries, as the server's
/v1/score builds it with `add_packs`), scored through the runtime's one scoring entry (runtime/admit/scoring.py) under
the server's default limits, in the engine's shared passes. Several batches may be in flight at once: the engine packs their contents into the same passes. A row's
media (bulk/media.py, read already) follow its text in its content and are read by the model's towers, checked
against the media limits of `media_policy`, as the server reads a request's media.
"""

from __future__ import annotations

import asyncio

import attrs

from spinfc.bulk.errors import BulkError, Rejected
from spinfc.bulk.questions import QuestionSet
from spinfc.bulk.transport import ContentResult, RowContent, text_and_media
from spinfc.config import EngineSettings, Limits
from spinfc.errors import CompileError
from spinfc.frontend import program_from_request
from spinfc.ir.nodes import Content, MediaPiece
from spinfc.runtime.admit.policy import Policy
from spinfc.runtime.admit.refused import Refused
from spinfc.runtime.admit.request_packs import add_packs
from spinfc.runtime.admit.scoring import score
from spinfc.runtime.engine import PassFailed
from spinfc.runtime.start import start_engine


class EngineTransport:
    def __init__(self, questions: QuestionSet, *, device: str | None = None, dtype: str | None = None,
                 token_budget: int | None = None, limits: Limits | None = None, load_model=None, media_policy=None):
        self.questions = questions
        self.load_model = load_model  # (name, dtype, device) -> Model, as `create_app`'s; None: the model's files
        self.settings = EngineSettings(model=questions.model, device=device, dtype=dtype, token_budget=token_budget)
        self.policy = Policy(limits or Limits())  # the server's default limits, every feature on
        self.media_policy = media_policy  # spinfc.media.MediaPolicy: the server's default when None
        self.model = questions.model
        self.fingerprint = ""
        self.engine = None
        self.running = None  # runtime.start.RunningEngine, once started

    async def start(self) -> None:
        """Load the model and start the engine; score one short text, so the questions' floor is cached and a
        question the engine refuses stops the job before any work (BulkError)."""
        loader = {"load_model": self.load_model} if self.load_model is not None else {}
        self.running = await asyncio.to_thread(start_engine, self.settings, media_policy=self.media_policy, **loader)
        self.engine, self.fingerprint = self.running.engine, self.running.fingerprint
        body = {"messages": [{"role": "user", "content": "-"}],
                "scoring": {"queries": list(self.questions.queries)},
                "packs": [{"id": p.id} for p in self.questions.packs]}
        self.plan = add_packs(program_from_request(body, model=self.model), self.questions.packs)
        try:  # the floor and the first pass's set-up are paid here, as the HTTP transport does
            await self.score(["Hello."])
        except Rejected as error:
            raise BulkError(f"the engine refuses these questions: {error.code}: {error.message}") from None

    async def score(self, texts: list[str | RowContent]) -> list[ContentResult]:
        plan = attrs.evolve(self.plan, program=attrs.evolve(
            self.plan.program, contents=tuple(_content(i, item) for i, item in enumerate(texts))))
        try:  # the runtime's one scoring entry, as the server's /v1/score calls it
            answered = await score(self.engine, plan, self.policy)
        except CompileError as error:
            raise Rejected(error.code, error.message) from None
        except Refused as error:
            raise Rejected(error.code, error.message) from None
        except PassFailed as error:
            raise Rejected("pass_failed", str(error)) from None
        return [ContentResult(own, packs) for own, packs in zip(answered.own, answered.packs)]

    async def close(self) -> None:
        if self.running is not None:
            await asyncio.to_thread(self.running.stop)


def _content(i: int, item: str | RowContent) -> Content:
    text, media = text_and_media(item)
    return Content(f"input-{i}", text, media=tuple(MediaPiece(len(text), source) for source in media))

