"""Schemathesis with every check (`--checks all`) against the app's own OpenAPI schema, on a server without a model
(fast, in CI): what the schema says about requests and answers must hold at the boundary.

Two checks are told what this run is: without a model, a body that passes every boundary check gets the documented
503 model_failed (tests/server/test_schema.py runs the same schema on gemma3-270m, where no 5xx is accepted); and a
body that matches the schema can still break a rule JSON Schema cannot say (a template's grammar, one of
`messages` and `inputs`), which is a 400 naming the mistake, so positive data may be answered 400 too; a body
over --max-body-bytes is 413, valid or not."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from spinfc.config import Settings
from spinfc.server.app import create_app

from .live import live_server
from .unready import no_model

APP = create_app(Settings(), load_model=no_model)
CONFIG = SchemathesisConfig.from_dict({"checks": {
    "not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "503"]},
    "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "409", "413", "429",
                                                      "503"]},
    "negative_data_rejection": {"expected-statuses": ["400", "401", "403", "404", "405", "413", "415", "429",
                                                     "503"]},
}})
SCHEMA = schemathesis.openapi.from_dict(APP.openapi_schema.to_schema(), config=CONFIG)


@pytest.fixture(scope="module")
def base_url():
    with live_server(APP, ready=False) as url:
        yield url


@SCHEMA.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_check_holds_for_generated_requests(case, base_url) -> None:
    case.call_and_validate(base_url=base_url, timeout=30)
