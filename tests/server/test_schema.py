"""Schemathesis against the app's own OpenAPI schema (GET /schema/openapi.json): generated requests for every
operation, sent to a live server on gemma3-270m (CPU); no request may get a 5xx.

Bounded to stay fast: a few examples per operation, small limits (so the rare valid request is cheap to run),
generation off (/v1/chat/completions without scoring answers 400 at once instead of generating), and no trusted
token (POST/DELETE /v0/drain answer 403, so the server never drains during the run)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig

from spinfc.config import EngineSettings, FeatureSettings, Limits, Settings
from spinfc.server.app import create_app

from .live import live_server

SETTINGS = Settings(
    engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=256, warmup="none"),
    features=FeatureSettings(generation=False),
    limits=Limits(max_content_tokens=48, max_prompts_per_input=4, max_processed_tokens=400, max_options=8,
                  max_body_bytes=20_000, max_extractions_per_input=1, max_beam_width=2, max_slot_tokens=4),
)
APP = create_app(SETTINGS)
# the coverage phase sends hundreds of variants of each documented example, each a real forward pass: off
CONFIG = SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}})
SCHEMA = schemathesis.openapi.from_dict(APP.openapi_schema.to_schema(), config=CONFIG)


@pytest.fixture(scope="module")
def base_url():
    with live_server(APP) as url:
        yield url


def test_the_schema_lists_every_route() -> None:
    paths = set(SCHEMA.raw_schema["paths"])
    assert {"/v1/score", "/v1/decisions", "/v1/systemone", "/v1/packs", "/v1/models", "/healthz", "/livez",
            "/readyz", "/v0/drain", "/metrics"} <= paths


@SCHEMA.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case, base_url) -> None:
    case.call_and_validate(base_url=base_url, checks=[not_a_server_error], timeout=300)


def test_the_generated_requests_reached_every_operation_and_none_failed(base_url) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{base_url}/metrics").text
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "spinfc_requests"]
    counted = [(s.labels["route"], int(s.labels["status"]), s.value) for s in family.samples
               if s.name == "spinfc_requests_total"]
    print(sorted(counted))
    assert all(status < 500 for _, status, _ in counted)
    routes = {route for route, _, _ in counted}
    assert {"/v1/score", "/v1/packs", "/v1/models", "/v0/drain", "/metrics"} <= routes
    assert routes & {"/v1/decisions", "/v1/systemone"}
