"""The server end to end on the real default model (gemma3-270m, fp32, CPU), through Litestar's TestClient:
readiness, /v1/score in every request form the seed shows, and every error as OpenAI's envelope. The seed's
complete request with its `month` extraction is test_openai_sdk.py's (one extraction on gemma3-270m, not two)."""

from __future__ import annotations

import concurrent.futures
import copy
import math

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Limits, Settings
from spinfc.server.app import create_app
from .live import wait_ready

pytestmark = pytest.mark.slow  # loads a packaged model

TICKET = "Customer support message:\nI was charged twice for September, please refund one of the charges."
OTHER = "Customer support message:\nThe app crashes every time I open the settings page."

# The seed README's example body, without its `month` extraction query.
SEED = {
    "model": "gemma3-270m",
    "messages": [{"role": "user", "content": TICKET}],
    "scoring": {"queries": [
        {"id": "topic", "template": "\n\nTopic (billing, technical, account, shipping, or cancellation):{?}",
         "options": [" billing", " technical", " account", " shipping", " cancellation"]},
        {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}", "options": [" yes", " no"]},
    ]},
}
MONTH = {"id": "month", "template": "\n\nQ: Which month was charged twice?\nA: \"{*}\""}  # the seed's extraction


@pytest.fixture(scope="module")
def started():
    """One app for the module, with what /healthz and /readyz said while the model was still loading."""
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"),
                        limits=Limits(max_options=6, max_content_tokens=200, max_body_bytes=20_000))
    with TestClient(create_app(settings), timeout=600) as client:
        while_loading = (client.get("/healthz"), client.get("/readyz"), client.post("/v1/score", json=SEED))
        wait_ready(client)
        yield client, while_loading


@pytest.fixture(scope="module")
def client(started) -> TestClient:
    return started[0]


@pytest.fixture(scope="module")
def seed_answer(client) -> dict:
    return score(client, SEED)


def score(client: TestClient, body: dict, status: int = 200) -> dict:
    response = client.post("/v1/score", json=body)
    assert response.status_code == status, response.text
    return response.json()


def error(client: TestClient, body, status: int = 400, **kwargs) -> dict:
    response = client.post("/v1/score", json=body, **kwargs) if not isinstance(body, bytes) else \
        client.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    envelope = response.json()
    assert set(envelope) == {"error"} and set(envelope["error"]) == {"message", "type", "code", "param"}
    return envelope["error"]


def logprobs(results: list[dict]) -> list[float]:
    return [o["logprob"] for r in results for c in r["combinations"] for o in c["options"]]


def test_health_answers_while_loading_and_ready_waits_for_the_warm_up(started) -> None:
    client, (health, ready, scored) = started
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "warming_up"
    assert scored.status_code == 503 and scored.json()["error"]["code"] == "warming_up"
    assert scored.headers["retry-after"] == "5"
    assert client.get("/readyz").json() == {"status": "ready", "model": "gemma3-270m"}


def test_the_seed_example_returns_every_field(seed_answer) -> None:
    body = seed_answer
    assert body["object"] == "score" and body["model"] == "gemma3-270m" and body["id"].startswith("score-")
    assert body["system_fingerprint"].startswith("spinfc-0.1.0-") and body["system_fingerprint"].endswith("-cpu")
    assert body["usage"]["output_tokens"] == 0 and body["usage"]["questions"] == 2 and body["usage"]["input_tokens"] > 0
    assert "inputs" not in body
    assert [r["id"] for r in body["results"]] == ["topic", "refund"]
    for result, query in zip(body["results"], SEED["scoring"]["queries"]):
        (combination,) = result["combinations"]
        assert combination["values"] == {}
        assert [o["text"] for o in combination["options"]] == query["options"]
        assert sum(o["p"] for o in combination["options"]) == pytest.approx(1.0, abs=1e-9)
        assert sum(o["floor_p"] for o in combination["options"]) == pytest.approx(1.0, abs=1e-9)
        assert all(o["logprob"] < 0 and 0 < o["p"] < 1 and 0 < o["floor_p"] < 1 for o in combination["options"])
        full = sum(math.exp(o["logprob"]) for o in combination["options"])
        assert combination["residual"] == pytest.approx(1 - full, abs=1e-9) and 0 <= combination["residual"] <= 1
        top = max(o["logprob"] for o in combination["options"])
        for option in combination["options"]:  # p is the softmax of the logprobs
            share = math.exp(option["logprob"] - top) / sum(math.exp(o["logprob"] - top) for o in combination["options"])
            assert option["p"] == pytest.approx(share, abs=1e-9)
    # the content moves the answers away from the floor
    assert max(abs(o["p"] - o["floor_p"]) for r in body["results"] for o in r["combinations"][0]["options"]) > 1e-3


def test_the_other_slot_spelling_and_an_alias_give_the_same_scores(client, seed_answer) -> None:
    spelled = copy.deepcopy(SEED)
    spelled["model"] = "gemma-3-270m"
    for query in spelled["scoring"]["queries"]:
        query["template"] = query["template"].replace("{?}", "<?>")
    answer = score(client, spelled)
    assert answer["model"] == "gemma3-270m"
    assert logprobs(answer["results"]) == pytest.approx(logprobs(seed_answer["results"]), abs=1e-5)


def test_many_inputs_are_answered_per_input(client) -> None:
    body = {k: v for k, v in SEED.items() if k != "messages"}
    body["model"] = "google/gemma-3-270m"  # the Hub name is an alias too
    body["inputs"] = [{"messages": [{"role": "user", "content": OTHER}]},
                      {"messages": [{"role": "system", "content": "Customer support message:"},
                                    {"role": "user", "content": [{"type": "text", "text": TICKET.split("\n")[1]}]}]}]
    answer = score(client, body)
    assert "results" not in answer and [i["index"] for i in answer["inputs"]] == [0, 1]
    assert answer["usage"]["questions"] == 4
    for item in answer["inputs"]:
        assert [r["id"] for r in item["results"]] == ["topic", "refund"]
        for result in item["results"]:
            assert sum(o["p"] for o in result["combinations"][0]["options"]) == pytest.approx(1.0)
    # the floor is shared: the same floor_p for every input
    floor = [[o["floor_p"] for r in item["results"] for o in r["combinations"][0]["options"]] for item in answer["inputs"]]
    assert floor[0] == floor[1]
    assert logprobs(answer["inputs"][0]["results"]) != pytest.approx(logprobs(answer["inputs"][1]["results"]), abs=1e-3)


def test_placeholders_make_one_combination_per_value(client) -> None:
    body = {"messages": [{"role": "user", "content": TICKET}], "scoring": {"queries": [
        {"id": "about", "template": "\n\nIs the message about {topic}?\nAnswer:<?>", "options": [" yes", " no"],
         "placeholders": {"topic": ["a refund", "a broken app", "the weather"]}}]}}
    (result,) = score(client, body)["results"]
    assert [c["values"] for c in result["combinations"]] == [{"topic": t} for t in ("a refund", "a broken app", "the weather")]
    for combination in result["combinations"]:
        assert [o["text"] for o in combination["options"]] == [" yes", " no"]
        assert sum(o["p"] for o in combination["options"]) == pytest.approx(1.0)
    yes = [c["options"][0]["logprob"] for c in result["combinations"]]
    assert len({round(lp, 4) for lp in yes}) == 3  # each value makes its own question


def test_concurrent_requests_are_both_answered_and_a_contents_scores_do_not_depend_on_its_neighbours(
        client, seed_answer) -> None:
    alone = seed_answer  # the ticket alone with its floor
    packed = {"inputs": [{"messages": [{"role": "user", "content": OTHER}]},
                         {"messages": [{"role": "user", "content": TICKET}]}], "scoring": SEED["scoring"]}
    other = {"messages": [{"role": "user", "content": "Where is my parcel? It is two weeks late."}],
             "scoring": {"queries": [SEED["scoring"]["queries"][1]]}}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda b: client.post("/v1/score", json=b), [packed, other])
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    assert logprobs(first.json()["inputs"][1]["results"]) == pytest.approx(logprobs(alone["results"]), abs=1e-5)
    assert second.json()["results"][0]["id"] == "refund"


def test_a_model_not_served_is_refused(client) -> None:
    err = error(client, {**SEED, "model": "smollm2-135m"})
    assert err["code"] == "model_not_served" and err["param"] == "model"
    assert "gemma3-270m" in err["message"] and "smollm2-135m" in err["message"]


def test_compile_errors_keep_their_code_and_place(client) -> None:
    body = copy.deepcopy(SEED)
    body["scoring"]["queries"][1]["template"] = "\n\nRefund? <foo>"
    err = error(client, body)
    assert err["code"] == "unknown_slot" and err["param"] == "scoring.queries[1].template"
    body = copy.deepcopy(SEED)
    body["scoring"]["queries"][1]["options"] = [" yes", " yes"]
    assert error(client, body)["code"] == "duplicate_option"
    assert error(client, {"messages": SEED["messages"], "inputs": []})["code"] == "conflicting_fields"


def test_malformed_bodies_get_the_envelope(client) -> None:
    assert error(client, b'{"messages": [')["code"] == "invalid_json"
    wrong = error(client, {**SEED, "messages": [{"role": "user", "content": 7}]})
    assert wrong["code"] == "wrong_type" and wrong["param"] == "messages[0].content"
    unknown = error(client, {**SEED, "temperature": 0.2})
    assert unknown["code"] == "unknown_field" and unknown["param"] == "temperature"
    assert error(client, b"")["code"] == "missing_body"
    missing = error(client, {**SEED, "messages": [{"content": TICKET}]})
    assert missing["code"] == "missing_field" and missing["param"] == "messages[0].role"


def test_models_and_unknown_routes(client) -> None:
    listed = client.get("/v1/models").json()
    (card,) = listed["data"]
    assert listed["object"] == "list" and card["id"] == "gemma3-270m" and card["ready"] is True
    assert "google/gemma-3-270m" in card["aliases"] and card["limits"]["token_budget"] == 512
    assert card["features"]["extraction"] is True
    missing = client.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong_method = client.get("/v1/score")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"


def test_limits_are_400s_that_name_the_limit_and_the_field(client) -> None:
    body = copy.deepcopy(SEED)
    body["scoring"]["queries"][0]["options"] += [" sales", " other"]
    err = error(client, body)
    assert err["code"] == "max_options_exceeded" and err["param"] == "scoring.queries[0].options"
    assert "--max-options" in err["message"]
    body = copy.deepcopy(SEED)
    body["scoring"]["queries"][1]["options"] = [" yes", " no, not at all, never"]
    err = error(client, body)
    assert err["code"] == "max_option_tokens_exceeded" and err["param"] == "scoring.queries[1].options[1]"
    long = {"inputs": [{"messages": [{"role": "user", "content": "short"}]},
                       {"messages": [{"role": "user", "content": "word " * 300}]}],
            "scoring": SEED["scoring"]}
    answer = client.post("/v1/score", json=long)  # the good input answered, the long one with its own error
    assert answer.status_code == 200, answer.text
    good, bad = answer.json()["inputs"]
    assert "results" in good and "error" not in good
    err = bad["error"]
    assert err["code"] == "max_content_tokens_exceeded" and err["param"] == "inputs[1].messages"
    err = error(client, {**SEED, "messages": [{"role": "user", "content": "x" * 25_000}]}, status=413)
    assert err["code"] == "max_body_bytes_exceeded"
