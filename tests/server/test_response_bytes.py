"""The bytes of a /v1/score answer, through the real app (route, Litestar's encoding), for fixed scores: the scoring
is stood in for, so only the way from a request's results to the socket is under test. A faster response path that
changes one byte of what a client reads (a float's digits, a key, an omitted field) fails here."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Settings
from spinfc.ir.nodes import Content, Option, OptionSlot, Program, Query, Question, SlotRef, SourceLoc, Template, Text
from spinfc.runtime.deliver.results import query_results
from spinfc.server.app import create_app
from spinfc.runtime.admit.scoring import Answered
from spinfc.server.scoring import ScoringOutcome
from spinfc.wire.schemas import PackResult

RECORDED = Path(__file__).with_name("response_bytes.txt")  # one answer a line: messages, inputs, messages + packs
LOC = SourceLoc("<test>")
TEMPLATE = Template("Is it ok?<?>", (Text("Is it ok?"), SlotRef("options", LOC)), LOC)


def program() -> Program:
    slots = [OptionSlot(tuple(Option(t, (5 + k,)) for k, t in enumerate(texts)))
             for texts in ((" yes", " no"), (" red", " green", " blue"))]
    contents = (Content("c0", "a"), Content("c1", "b"), Content("floor", "", is_floor=True))
    questions = (Question("q", (("x", "a"),), "p", slots[0], (1,)), Question("q", (("x", "b"),), "p", slots[0], (1,)),
                 Question("r", (), "p", slots[1], (1,)))
    return Program("test", contents, (Query("q", TEMPLATE, slots[0], (("x", ("a", "b")),)),
                                      Query("r", TEMPLATE, slots[1])), questions)


SCORES = [((math.log(0.6), math.log(0.2)), (-0.0, 0.0), (-1.25, -3.5, -1.25)),
          ((-0.1, -1e-300), (-745.5, -2000.0), (-0.7, -0.7, -1e-17))]
FLOOR = ((-0.5, -0.9), (-0.3, -1.9), (-1.0, -2.0, -3.0))
PACK = PackResult(id="spinfc/test", version="1.0.0", presentation="ignored", results=[], categories={"a": 0.1 + 0.2},
                  decision=None, rule=None, reason="default")


class Scored:
    processed_tokens = input_tokens = 1234
    output_tokens = 0


@pytest.fixture
def client(monkeypatch):
    route = importlib.import_module("spinfc.server.routes.score")  # the module (the package exports the handler)
    own = [query_results(program(), scores, FLOOR) for scores in SCORES]

    async def score_request(service, ctx, request):
        n = len(request.inputs or [None])
        answered = Answered(own=own[:n], packs=[[PACK] if request.packs else [] for _ in range(n)],
                            scored=Scored(), questions=3 * n)
        return ScoringOutcome(answered, debug=None)

    monkeypatch.setattr(route, "score_request", score_request)
    monkeypatch.setattr(route.uuid, "uuid4", lambda: type("U", (), {"hex": "0" * 32})())
    monkeypatch.setattr(route.time, "time", lambda: 1_700_000_000.5)
    app = create_app(Settings(engine=EngineSettings(model="gemma3-270m", device="cpu")), load_model=None)
    service = app.state.service
    service.status, service.engine, service.fingerprint = "ready", object(), "fp_test"
    return TestClient(app)  # no lifespan: nothing loads


QUERIES = {"queries": [{"id": "q", "template": "Is {x} ok?<?>", "options": [" yes", " no"],
                        "placeholders": {"x": ["a", "b"]}}, {"id": "r", "template": "<?>", "options": ["1", "2", "3"]}]}
MESSAGES = [{"role": "user", "content": "a"}]
BODIES = [{"messages": MESSAGES, "scoring": QUERIES},
          {"inputs": [{"messages": MESSAGES}, {"messages": MESSAGES}], "scoring": QUERIES},
          {"messages": MESSAGES, "scoring": QUERIES, "packs": [{"id": "spinfc/test"}]}]


def test_answers_are_the_recorded_bytes(client) -> None:
    answers = []
    for body in BODIES:
        response = client.post("/v1/score", json=body)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        answers.append(response.content)
    assert answers == RECORDED.read_bytes().splitlines()
