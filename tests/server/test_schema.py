"""Schemathesis with every check against the app's own OpenAPI schema (GET /schema/openapi.json): generated requests
for every operation, sent to a live server on gemma3-270m (CPU); no request may get a 5xx, and every answer must be
what the schema documents (test_schema_boundary.py runs the same checks without a model, fast).

A body that matches the schema can still break a rule JSON Schema cannot say (a template's grammar, one of
`messages` and `inputs`): its 400 names the mistake, so positive data may be answered 400; and any body over
--max-body-bytes (20,000 here) is 413, valid or not.

Bounded to stay fast: a few examples per operation, small limits (so the rare valid request is cheap to run),
generation off (/v1/chat/completions without scoring answers 400 at once instead of generating), and no trusted
token (POST/DELETE /v0/drain answer 403, so the server never drains during the run)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.config import SchemathesisConfig

from spinfc.config import EngineSettings, FeatureSettings, Limits, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server

pytestmark = pytest.mark.slow  # a live server on gemma3-270m

SETTINGS = Settings(
    engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=256, warmup="none"),
    features=FeatureSettings(generation=False),
    limits=Limits(max_content_tokens=48, max_prompts_per_input=4, max_processed_tokens=400, max_options=8,
                  max_body_bytes=20_000, max_extractions_per_input=1, max_beam_width=2, max_slot_tokens=4),
)
APP = create_app(SETTINGS, load_model=load_shared)
# the coverage phase sends hundreds of variants of each documented example, each a real forward pass: off
CONFIG = SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}, "checks": {
    "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "409", "413", "429"]},
    "negative_data_rejection": {"expected-statuses": ["400", "401", "403", "404", "405", "413", "415", "429"]}}})
SCHEMA = schemathesis.openapi.from_dict(APP.openapi_schema.to_schema(), config=CONFIG)


@pytest.fixture(scope="module")
def base_url():
    with live_server(APP) as url:
        yield url


def test_the_schema_lists_every_route() -> None:
    paths = set(SCHEMA.raw_schema["paths"])
    assert {"/v1/score", "/v1/decisions", "/v1/systemone", "/v1/packs", "/v1/models", "/healthz", "/livez",
            "/readyz", "/v0/drain", "/metrics", "/v1/completions"} <= paths


@pytest.mark.slow
@SCHEMA.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case, base_url) -> None:
    case.call_and_validate(base_url=base_url, timeout=300)  # every check


def test_generated_requests_reach_every_operation_and_are_counted(base_url) -> None:
    """Sends its own traffic (a few generated cases per operation), so it passes alone or after the others."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    sent: dict[str, list[int]] = {}
    for result in SCHEMA.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=3, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def call(case) -> None:
            sent.setdefault(operation.path, []).append(case.call(base_url=base_url, timeout=300).status_code)

        call()
    assert all(status < 500 for statuses in sent.values() for status in statuses), sent
    text = httpx.get(f"{base_url}/metrics").text
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "spinfc_requests"]
    counted = {(s.labels["route"], int(s.labels["status"])) for s in family.samples if s.name == "spinfc_requests_total"}
    # /readyz answers 503 warming_up to live_server's polls while the model loads: by design, not a failure
    assert all(status < 500 for route, status in counted if route != "/readyz"), counted
    routes = {route for route, _ in counted}
    assert {"/v1/score", "/v1/packs", "/v1/models", "/v0/drain", "/metrics"} <= routes
    assert routes & {"/v1/decisions", "/v1/systemone"}
