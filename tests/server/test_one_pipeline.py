"""One pipeline: what a server runs for a request alone is what `spinfc compile --emit plan` shows for it. The
served plan (the `debug` field, under --debug) places the same segments in the same passes at the same rows as the
compiler's plan-packing, for the same shapes (gemma3-270m, CPU)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from litestar.testing import TestClient

from spinfc.cli import compile_shapes
from spinfc.compiler import compile
from spinfc.config import EngineSettings, ServerSettings, Settings
from spinfc.frontend import program_from_request
from spinfc.passes import PassContext
from spinfc.registry import load_tokenizer
from spinfc.server.app import create_app

from packaged import load_shared

pytestmark = pytest.mark.slow  # a live app on gemma3-270m

BODY = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "multi-input.json").read_text())
BUDGET = 256  # two contents a pass: the three inputs and the floor take two passes


def served_placements(debug: dict) -> list[list[tuple[str, int, int]]]:
    (part,) = debug["plan"]
    return [[(p["content"], p["start"], p["rows"]) for p in passed["placements"]] for passed in part["passes"]]


def compiled_placements() -> list[list[tuple[str, int, int]]]:
    program = program_from_request(BODY, model="gemma3-270m")
    ctx = PassContext(tokenizer=load_tokenizer("gemma3-270m"), shapes=compile_shapes("cpu", BUDGET, 128))
    program = compile(program, ctx, until="plan-packing")
    return [[(program.contents[p.content].id, p.start, p.length) for p in pss.placements]
            for pss in program.plan.passes]


def test_the_served_plan_of_a_request_alone_is_the_compilers() -> None:
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=BUDGET, warmup="none"),
                        server=ServerSettings(debug=True))
    with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
        for _ in range(600):
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.5)
        response = client.post("/v1/score", json=BODY)
        assert response.status_code == 200, response.text
        served = served_placements(response.json()["debug"])
    want = compiled_placements()
    assert len(want) == 2  # the plan really has more than one pass
    assert served == want
