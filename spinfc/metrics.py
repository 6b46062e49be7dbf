"""Prometheus metrics of one server: requests, queue depth, passes, tokens, pass fill ratio, latency histograms.

The server owns one `Metrics` (made in the app factory, kept in app state) with its own registry: nothing global,
so two apps in one process (tests) never share counts. GET /metrics answers `metrics.render()` with
`CONTENT_TYPE`. Series (all prefixed `spinfc_`):

    requests_total{route,status}           requests answered, by route template (/v1/score) and HTTP status
    request_duration_seconds{route}        time from arrival to answer (histogram)
    requests_in_flight                     requests being answered now
    queue_depth                            requests accepted and waiting for the engine
    passes_total                           forward passes run
    tokens_processed_total                 tokens in those passes (padding excluded)
    questions_scored_total                 questions answered (one per query, content and combination)
    pass_fill_ratio                        used tokens / token budget, per pass (histogram)
    pass_duration_seconds                  wall time of one pass (histogram)
    ready, draining                        1 or 0, what /readyz says and why
    content_cache_hits_total               contents read from the content cache (their questions alone run)
    content_cache_misses_total             contents looked up and read anew
    content_cache_evictions_total          entries dropped to keep within the budget
    content_cache_tokens                   content tokens held now, and content_cache_budget_tokens its bound
    info{version,model,device,...}         1, with the served model and engine as labels
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the classic text format generate_latest writes
REQUEST_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
PASS_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
FILL_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


class Metrics:
    """The counters of one server. Methods are cheap and thread-safe (prometheus_client locks each value), so the
    engine thread and the event loop may both call them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("spinfc_requests", "Requests answered, by route template and HTTP status.",
                                ["route", "status"], registry=r)
        self.request_seconds = Histogram("spinfc_request_duration_seconds", "Time from arrival to answer.",
                                         ["route"], buckets=REQUEST_SECONDS, registry=r)
        self.in_flight = Gauge("spinfc_requests_in_flight", "Requests being answered now.", registry=r)
        self.queue_depth = Gauge("spinfc_queue_depth", "Requests accepted and waiting for the engine.", registry=r)
        self.passes = Counter("spinfc_passes", "Forward passes run.", registry=r)
        self.tokens = Counter("spinfc_tokens_processed", "Tokens in the passes run, padding excluded.", registry=r)
        self.rows = Counter("spinfc_rows_launched", "Rows of the launches run, padding included (less "
                            "spinfc_tokens_processed: the padding).", registry=r)
        self.questions = Counter("spinfc_questions_scored", "Questions answered (per content and combination).",
                                 registry=r)
        self.fill = Histogram("spinfc_pass_fill_ratio", "Used tokens over the token budget, per pass.",
                              buckets=FILL_BUCKETS, registry=r)
        self.pass_seconds = Histogram("spinfc_pass_duration_seconds", "Wall time of one forward pass.",
                                      buckets=PASS_SECONDS, registry=r)
        self.ready = Gauge("spinfc_ready", "1 when /readyz answers 200.", registry=r)
        self.draining = Gauge("spinfc_draining", "1 while the server is drained (POST /v0/drain).", registry=r)
        self.info = Info("spinfc", "The served model and engine.", registry=r)

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        """One answered request. `route` is the route template (`/v1/score`), never the raw path, so that the
        number of series stays bounded; use "other" for paths that matched no route."""
        self.requests.labels(route=route, status=str(status)).inc()
        self.request_seconds.labels(route=route).observe(seconds)

    def observe_pass(self, tokens: int, budget: int, seconds: float) -> None:
        """One forward pass that held `tokens` real tokens of a `budget`-token launch and took `seconds`."""
        if budget <= 0 or not 0 <= tokens <= budget:
            raise ValueError(f"a pass holds 0 to {budget} tokens of its budget, got {tokens}")
        self.passes.inc()
        self.tokens.inc(tokens)
        self.rows.inc(budget)
        self.fill.observe(tokens / budget)
        self.pass_seconds.observe(seconds)

    def observe_questions(self, count: int) -> None:
        self.questions.inc(count)

    def set_queue_depth(self, depth: int) -> None:
        self.queue_depth.set(depth)

    def set_in_flight(self, count: int) -> None:
        self.in_flight.set(count)

    def set_state(self, *, ready: bool, draining: bool) -> None:
        self.ready.set(1 if ready else 0)
        self.draining.set(1 if draining else 0)

    def set_info(self, **labels: str) -> None:
        """Labels of `spinfc_info` (version, model, device, fingerprint, ...); all values are strings."""
        self.info.info({key: str(value) for key, value in labels.items()})

    def watch_content_cache(self, cache) -> None:
        """Report `cache`'s counts (a `runtime.content_cache.ContentCache`) at every scrape: the engine counts."""
        self.registry.register(_ContentCacheCollector(cache))

    def render(self) -> bytes:
        """The Prometheus text exposition of every series, for GET /metrics (with `CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class _ContentCacheCollector:
    """The content cache's counters, read when /metrics is scraped (the engine's worker keeps them)."""

    def __init__(self, cache) -> None:
        self.cache = cache

    def describe(self):
        return []

    def collect(self):
        with self.cache.lock:
            stats = self.cache.stats
            counts = (stats.hits, stats.misses, stats.evictions, stats.tokens)
        for (name, text), value in zip((("hits", "Contents read from the content cache."),
                                        ("misses", "Contents looked up in the content cache and read anew."),
                                        ("evictions", "Content cache entries dropped to keep within its budget.")),
                                       counts):
            yield CounterMetricFamily(f"spinfc_content_cache_{name}", text, value=value)
        yield GaugeMetricFamily("spinfc_content_cache_tokens", "Content tokens held in the content cache.",
                                value=counts[3])
        yield GaugeMetricFamily("spinfc_content_cache_budget_tokens", "The content cache's budget in tokens.",
                                value=self.cache.budget)
