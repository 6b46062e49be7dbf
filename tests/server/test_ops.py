"""Operations on a live server (uvicorn, real HTTP, gemma3-270m on the CPU) started with --token, --trusted-token
and --queue 2: bearer tokens, overload (429 with Retry-After, nothing dropped), drain, health, /metrics.

The model is wrapped in `Pausable` (live.py) so that requests can be held in flight while the test looks."""

from __future__ import annotations

import concurrent.futures

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from spinfc.config import EngineSettings, ServerSettings, Settings
from spinfc.server.app import create_app
from .live import live_server, pausable_loader, wait_until

pytestmark = pytest.mark.slow  # loads a packaged model

TOKEN, TRUSTED = "s3cret-token", "trusted-front-end"
USER = {"Authorization": f"Bearer {TOKEN}"}
FRONT = {"Authorization": f"Bearer {TRUSTED}"}
BODY = {"messages": [{"role": "user", "content": "Customer message: my parcel never arrived."}],
        "scoring": {"queries": [{"id": "late", "template": "\n\nIs a delivery late?\nAnswer:<?>",
                                 "options": [" yes", " no"]}]}}


@pytest.fixture(scope="module")
def server():
    models: list = []
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"),
                        server=ServerSettings(token=TOKEN, trusted_token=TRUSTED, queue=2))
    app = create_app(settings, load_model=pausable_loader(models))
    with live_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        yield client, models[0], app.state.service


def logprobs(answer: dict) -> list[float]:
    return [o["logprob"] for r in answer["results"] for c in r["combinations"] for o in c["options"]]


def envelope(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code", "param"} and error["code"] == code, error
    return error


def test_health_routes_need_no_token_and_the_others_do(server) -> None:
    client, _, _ = server
    for path in ("/healthz", "/livez", "/readyz"):
        assert client.get(path).status_code == 200, path
    for method, path in (("GET", "/v1/models"), ("GET", "/v1/packs"), ("GET", "/metrics"), ("POST", "/v1/score"),
                         ("POST", "/v1/decisions"), ("GET", "/schema/openapi.json")):
        missing = client.request(method, path, json=BODY)
        error = envelope(missing, 401, "invalid_token")
        assert missing.headers["www-authenticate"] == "Bearer" and "no bearer token" in error["message"]
        wrong = client.request(method, path, json=BODY, headers={"Authorization": f"Bearer {TOKEN}x"})
        assert "not this server's" in envelope(wrong, 401, "invalid_token")["message"]
    assert client.get("/v1/models", headers={"Authorization": TOKEN}).status_code == 401  # no Bearer scheme
    assert client.get("/v1/models", headers=USER).status_code == 200
    assert client.get("/v1/models", headers=FRONT).status_code == 200  # the trusted token opens every route too


def test_only_the_trusted_token_sends_limits_sees_the_plan_and_drains(server) -> None:
    client, _, _ = server
    plain = client.post("/v1/score", json=BODY, headers=USER)
    assert plain.status_code == 200 and "debug" not in plain.json()
    error = envelope(client.post("/v1/score", json={**BODY, "limits": {"max_options": 3}}, headers=USER), 403,
                     "trusted_token_required")
    assert error["param"] == "limits" and error["type"] == "permission_error"
    envelope(client.post("/v1/score", json={**BODY, "features": {"extraction": False}}, headers=USER), 403,
             "trusted_token_required")
    envelope(client.post("/v0/drain", headers=USER), 403, "trusted_token_required")
    envelope(client.delete("/v0/drain", headers=USER), 403, "trusted_token_required")
    trusted = client.post("/v1/score", json={**BODY, "limits": {"max_options": 3}}, headers=FRONT)
    assert trusted.status_code == 200, trusted.text
    (plan,) = trusted.json()["debug"]["plan"]
    assert plan["budget"] == 512 and plan["questions"] == 1 and plan["floor_cached"] is True
    assert [s["content"] for s in plan["segments"]] == ["input-0", "floor"]
    assert all(s["rows"] > 0 and s["reads"] == 2 for s in plan["segments"])
    assert logprobs(trusted.json()) == pytest.approx(logprobs(plain.json()), abs=1e-5)


def test_overload_answers_every_client_with_200_or_429_and_retry_after(server) -> None:
    client, model, service = server
    model.pause()
    try:
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            futures = [pool.submit(client.post, "/v1/score", json=BODY, headers=USER) for _ in range(32)]
            wait_until(lambda: sum(f.done() for f in futures) >= 29, what="29 refusals")
            assert service.admission.active == 3  # --queue 2: one running and two waiting
            model.resume()
            responses = [f.result() for f in futures]
    finally:
        model.resume()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 3 + [429] * 29
    for response in responses:
        if response.status_code == 429:
            error = envelope(response, 429, "concurrency_limit")
            assert error["type"] == "rate_limit_error" and int(response.headers["retry-after"]) >= 1
        else:
            assert response.json()["results"][0]["id"] == "late"
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/score", json=BODY, headers=USER).status_code == 200
    assert service.admission.active == 0


def test_drain_lets_calls_in_flight_finish_and_refuses_new_ones(server) -> None:
    client, model, service = server
    model.pause()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(client.post, "/v1/score", json=BODY, headers=USER)
            wait_until(lambda: model.waiting == 1, what="the call to reach the engine")
            drained = client.post("/v0/drain", headers=FRONT)
            assert drained.status_code == 200
            assert drained.json() == {"status": "draining", "draining": True, "in_flight": 1}
            envelope(client.get("/readyz"), 503, "draining")
            assert client.get("/healthz").status_code == 200 and client.get("/livez").status_code == 200
            refused = client.post("/v1/score", json=BODY, headers=USER)
            envelope(refused, 503, "draining")
            assert "retry-after" in refused.headers
            assert not in_flight.done()
            model.resume()
            assert in_flight.result().status_code == 200
    finally:
        model.resume()
    back = client.delete("/v0/drain", headers=FRONT)
    assert back.json() == {"status": "ready", "draining": False, "in_flight": 0}
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/score", json=BODY, headers=USER).status_code == 200


def test_metrics_parse_and_count_requests_passes_and_tokens(server) -> None:
    client, _, _ = server
    client.post("/v1/score", json=BODY, headers=USER)
    response = client.get("/metrics", headers=USER)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    requests = {(s.labels["route"], s.labels["status"]): s.value for s in families["spinfc_requests"].samples
                if s.name == "spinfc_requests_total"}
    assert requests[("/v1/score", "200")] >= 3
    assert requests.get(("/v1/score", "401"), 0) >= 1 and requests.get(("/readyz", "200"), 0) >= 1

    def value(family: str, sample: str) -> float:
        return next(s.value for s in families[family].samples if s.name == sample)

    assert value("spinfc_passes", "spinfc_passes_total") >= 2
    assert value("spinfc_tokens_processed", "spinfc_tokens_processed_total") > 0
    assert value("spinfc_pass_fill_ratio", "spinfc_pass_fill_ratio_count") >= 2
    assert 0 < value("spinfc_pass_fill_ratio", "spinfc_pass_fill_ratio_sum")
    assert value("spinfc_request_duration_seconds", "spinfc_request_duration_seconds_count") >= 3
    assert value("spinfc_queue_depth", "spinfc_queue_depth") == 0
    assert value("spinfc_questions_scored", "spinfc_questions_scored_total") >= 3
    assert value("spinfc_ready", "spinfc_ready") == 1 and value("spinfc_draining", "spinfc_draining") == 0
    (info,) = families["spinfc_info"].samples
    assert info.labels["model"] == "gemma3-270m" and info.labels["fingerprint"].endswith("-float32-reference-cpu")
