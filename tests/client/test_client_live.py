"""spinfc.client against a live server (the real gemma3-270m on the CPU): typed answers from every route, a job
split into several requests scoring the same as one request, the async client, and the client scoring from a
process where torch cannot be imported."""

from __future__ import annotations

import asyncio

import pytest

from spinfc.client import AsyncClient, Client, DecisionResponse, ModelList, PackList, ScoreResponse, SpinfcError
from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from tests.server.live import live_server
from .test_without_torch import run_blocked

pytestmark = pytest.mark.slow

SCORING = {"queries": [{"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:<?>",
                        "options": [" yes", " no"]}]}
TEXTS = ["I was charged twice, refund one charge please.", "The app crashes when I open settings.",
         "Where is my parcel? It is a week late.", "Please cancel my subscription and refund this month.",
         "Thanks, all good now."]


@pytest.fixture(scope="module")
def url():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"))
    with live_server(create_app(settings, load_model=load_shared)) as base:
        yield base


@pytest.fixture(scope="module")
def client(url):
    with Client(url) as c:
        yield c


def ps(results) -> list[float]:
    return [option.p for result in results for combo in result.combinations for option in combo.options]


def test_models_packs_score_and_decisions_answer_typed_structs(client):
    models = client.models()
    assert isinstance(models, ModelList) and models.data[0].id == "gemma3-270m" and models.data[0].ready
    assert isinstance(client.packs(), PackList)
    answer = client.score(messages=[{"role": "user", "content": TEXTS[0]}], scoring=SCORING)
    assert isinstance(answer, ScoreResponse) and answer.results[0].id == "refund"
    question = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
    decided = client.decisions(state=TEXTS[0], questions={"refund": question})
    assert isinstance(decided, DecisionResponse) and 0 <= decided.answers["refund"].answer <= 1
    with pytest.raises(SpinfcError) as raised:
        client.score(messages=[{"role": "user", "content": "x"}], scoring=SCORING, model="not-served")
    assert raised.value.status == 400 and raised.value.code == "model_not_served" and raised.value.param == "model"


def test_a_split_job_scores_as_one_request(client):
    whole = client.score(inputs=[{"messages": [{"role": "user", "content": t}]} for t in TEXTS], scoring=SCORING)
    batch = client.score_many(TEXTS, SCORING, max_inputs=2, concurrency=2)
    assert batch.requests == 3 and [r.index for r in batch.inputs] == list(range(len(TEXTS)))
    for one, split in zip(whole.inputs, batch.inputs):
        assert max(abs(a - b) for a, b in zip(ps(one.results), ps(split.results))) < 1e-5


def test_the_async_client(url):
    async def main():
        async with AsyncClient(url) as client:
            return await client.score_many(TEXTS[:3], SCORING, max_inputs=1, concurrency=3)

    batch = asyncio.run(main())
    assert batch.requests == 3 and [r.index for r in batch.inputs] == [0, 1, 2]


def test_the_client_scores_from_a_process_without_torch(url, client):
    result = run_blocked(f"""
        from spinfc.client import Client
        answer = Client({url!r}).score(messages=[{{"role": "user", "content": {TEXTS[0]!r}}}], scoring={SCORING!r})
        print("P", answer.results[0].combinations[0].options[0].p)
        print("blocked modules loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """)
    assert result.returncode == 0, result.stderr
    assert "blocked modules loaded: []" in result.stdout
    here = client.score(messages=[{"role": "user", "content": TEXTS[0]}], scoring=SCORING)
    p = float(next(line for line in result.stdout.splitlines() if line.startswith("P ")).split()[1])
    assert abs(p - here.results[0].combinations[0].options[0].p) < 1e-6
