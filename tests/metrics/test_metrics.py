"""The exposition parses as Prometheus text and counts what was observed; two Metrics share nothing."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spinfc.metrics import CONTENT_TYPE, Metrics


def samples(metrics: Metrics) -> dict:
    """{(sample name, frozenset of labels): value} from the rendered text, parsed by Prometheus' own parser."""
    text = metrics.render().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_requests_by_route_and_status_with_latency():
    metrics = Metrics()
    metrics.observe_request("/v1/score", 200, 0.2)
    metrics.observe_request("/v1/score", 200, 3.0)
    metrics.observe_request("/v1/score", 429, 0.001)
    got = samples(metrics)
    assert got[("spinfc_requests_total", frozenset({("route", "/v1/score"), ("status", "200")}))] == 2
    assert got[("spinfc_requests_total", frozenset({("route", "/v1/score"), ("status", "429")}))] == 1
    route = ("route", "/v1/score")
    assert got[("spinfc_request_duration_seconds_count", frozenset({route}))] == 3
    assert got[("spinfc_request_duration_seconds_sum", frozenset({route}))] == pytest.approx(3.201)
    assert got[("spinfc_request_duration_seconds_bucket", frozenset({route, ("le", "0.25")}))] == 2
    assert got[("spinfc_request_duration_seconds_bucket", frozenset({route, ("le", "+Inf")}))] == 3


def test_passes_tokens_fill_ratio_and_pass_latency():
    metrics = Metrics()
    metrics.observe_pass(tokens=1024, budget=2048, seconds=0.4)
    metrics.observe_pass(tokens=2000, budget=2048, seconds=0.6)
    metrics.observe_questions(56)
    got = samples(metrics)
    assert got[("spinfc_passes_total", frozenset())] == 2
    assert got[("spinfc_tokens_processed_total", frozenset())] == 3024
    assert got[("spinfc_rows_launched_total", frozenset())] == 4096  # padding: 4096 - 3024 rows
    assert got[("spinfc_questions_scored_total", frozenset())] == 56
    assert got[("spinfc_pass_fill_ratio_sum", frozenset())] == pytest.approx(0.5 + 2000 / 2048)
    assert got[("spinfc_pass_fill_ratio_bucket", frozenset({("le", "0.5")}))] == 1
    assert got[("spinfc_pass_fill_ratio_bucket", frozenset({("le", "0.95")}))] == 1
    assert got[("spinfc_pass_fill_ratio_bucket", frozenset({("le", "1.0")}))] == 2
    assert got[("spinfc_pass_duration_seconds_sum", frozenset())] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="0 to 2048 tokens"):
        metrics.observe_pass(tokens=4096, budget=2048, seconds=1)


def test_gauges_and_info():
    metrics = Metrics()
    metrics.set_queue_depth(3)
    metrics.set_in_flight(1)
    metrics.set_state(ready=True, draining=False)
    metrics.set_info(version="0.1.0", model="gemma3-270m", device="cpu")
    got = samples(metrics)
    assert got[("spinfc_queue_depth", frozenset())] == 3
    assert got[("spinfc_requests_in_flight", frozenset())] == 1
    assert (got[("spinfc_ready", frozenset())], got[("spinfc_draining", frozenset())]) == (1, 0)
    info = frozenset({("version", "0.1.0"), ("model", "gemma3-270m"), ("device", "cpu")})
    assert got[("spinfc_info", info)] == 1
    metrics.set_queue_depth(0)
    assert samples(metrics)[("spinfc_queue_depth", frozenset())] == 0


def test_two_servers_share_nothing():
    first, second = Metrics(), Metrics()
    first.observe_request("/v1/score", 200, 0.1)
    assert ("spinfc_requests_total", frozenset({("route", "/v1/score"), ("status", "200")})) not in samples(second)


def test_content_type_is_prometheus_text():
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")
    assert b"# TYPE spinfc_requests_total counter" in Metrics().render()
