"""The router on the two embedded models, over HTTP: none loaded at start, each loaded by its first request, swapped
under a concurrent mixed load with every answer from the model it names, scores byte for byte those of the model
served alone, the memory of a model past its TTL given back, a broken entry failing alone, and the event feed."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from spinfc.config import Settings
from spinfc.router import create_router_app, read_models
from spinfc.router.memory import resident_bytes
from spinfc.server.app import create_app
from tests.server.live import live_server, wait_until

pytestmark = pytest.mark.slow

MODELS = """
[router]
memory_gib = {memory}
load_timeout = 300

[models.smol]
model = "smollm2-135m"
warmup = "none"
ttl = {ttl}

[models.gemma]
model = "gemma3-270m"
warmup = "none"

[models.broken]
model = "{broken}"
"""

BODY = {"messages": [{"role": "user", "content": "I was charged twice for September, please refund one of them."}],
        "scoring": {"queries": [
            {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:<?>",
             "options": [" yes", " no"]},
            {"id": "topic", "template": "\n\nTopic:<?>", "options": [" billing", " technical", " shipping"]}]}}


def scores(answer: httpx.Response) -> dict:
    """The answer but its id, time and usage (usage counts the tokens read, fewer once the floor is cached)."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return {key: value for key, value in body.items() if key not in ("id", "created", "usage")}


def close(got, want, tolerance: float = 1e-5) -> bool:
    """Equal structures whose numbers agree within `tolerance`."""
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(close(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(close, got, want))
    if isinstance(want, float):
        return abs(got - want) <= tolerance
    return got == want


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    folder = tmp_path_factory.mktemp("router")
    broken = folder / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)  # a GGUF header and nothing behind it
    path = folder / "models.toml"
    # the budget holds one of the two models (SmolLM2 ~0.6 GiB, Gemma 3 270M ~1.2 GiB in float32), not both
    path.write_text(MODELS.format(memory=1.5, ttl=8, broken=broken))
    settings = Settings()
    config = read_models(path, settings)
    app = create_router_app(settings, config)
    events: list[dict] = []
    with live_server(app) as url:
        def listen():
            with httpx.stream("GET", f"{url}/models/sse", timeout=None) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
        threading.Thread(target=listen, daemon=True).start()
        wait_until(lambda: len(events) >= 3, 30, "the feed's first events")
        yield url, config, app, events


def test_nothing_is_loaded_at_start(router):
    url, _, _, events = router
    models = httpx.get(f"{url}/v1/models").json()["data"]
    assert {m["id"]: m["status"] for m in models} == {"smol": "unloaded", "gemma": "unloaded", "broken": "unloaded"}
    assert [(e["model"], e["status"]) for e in events[:3]] == [("smol", "unloaded"), ("gemma", "unloaded"),
                                                               ("broken", "unloaded")]


def test_scores_through_the_router_are_the_model_served_alone(router):
    url, config, _, _ = router
    routed = {name: scores(httpx.post(f"{url}/v1/score", json={**BODY, "model": name}, timeout=600))
              for name in ("smol", "gemma")}
    for name in ("smol", "gemma"):
        with live_server(create_app(config.models[name].settings)) as alone:
            assert scores(httpx.post(f"{alone}/v1/score", json={**BODY, "model": name}, timeout=600)) == routed[name]
    assert routed["smol"]["model"] == "smol" and routed["gemma"]["model"] == "gemma"


def test_a_mixed_concurrent_load_swaps_and_loses_nothing(router):
    url, _, app, events = router
    want = {name: scores(httpx.post(f"{url}/v1/score", json={**BODY, "model": name}, timeout=600))
            for name in ("gemma", "smol")}
    names = ["smol", "gemma"] * 2
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda n: httpx.post(f"{url}/v1/score", json={**BODY, "model": n}, timeout=600),
                                names))
    for name, answer in zip(names, answers):  # every one answered, by the model it named
        got = scores(answer)
        assert got["model"] == name
        # packed with other requests: equal within the CPU's tolerance (bit-identity is CUDA's promise)
        assert close(got["results"], want[name]["results"])
    swaps = [e for e in events if e["status"] == "unloaded" and e.get("time")]
    assert swaps, "the budget holds one model: serving both must have swapped"
    for slot in app.router.slots.values():
        assert slot.pins == 0


def test_a_model_idle_past_its_ttl_unloads_and_gives_its_memory_back(router):
    url, _, app, _ = router
    slot = app.router.slots["smol"]
    scores(httpx.post(f"{url}/v1/score", json={**BODY, "model": "smol"}, timeout=600))
    loaded = resident_bytes()
    assert slot.state == "ready" and slot.memory_bytes
    wait_until(lambda: slot.state == "unloaded", 60, "smol to unload after its 8 s ttl")
    freed = loaded - resident_bytes()
    print(f"smol measured {slot.memory_bytes / 2**20:.0f} MiB at load; RSS fell {freed / 2**20:.0f} MiB at unload")
    assert freed > 0.5 * slot.memory_bytes


def test_a_broken_entry_fails_alone_and_is_retried(router):
    url, _, app, events = router
    first = httpx.post(f"{url}/v1/score", json={**BODY, "model": "broken"}, timeout=600)
    assert first.status_code == 503 and first.json()["error"]["code"] == "model_failed"
    assert "broken" in first.json()["error"]["message"]

    def failures() -> int:
        return sum(e["status"] == "failed" for e in events if e["model"] == "broken")

    # the feed is another connection: its event may come after the 503 that the same failure answered
    wait_until(lambda: failures() >= 1, 30, "the failed load's event")
    failed = failures()
    second = httpx.post(f"{url}/v1/score", json={**BODY, "model": "broken"}, timeout=600)
    assert second.status_code == 503
    wait_until(lambda: failures() >= failed + 1, 30, "the retried load's event")
    slots = {s["model"]: s for s in httpx.get(f"{url}/slots").json()}
    assert slots["broken"]["status"] == "failed" and slots["broken"]["error"]
    assert httpx.post(f"{url}/v1/score", json={**BODY, "model": "smol"}, timeout=600).status_code == 200


def test_the_feed_tells_each_transition_in_order(router):
    _, _, _, events = router
    smol = [e["status"] for e in events if e["model"] == "smol"][1:]  # after the first snapshot
    assert smol[:2] == ["loading", "ready"]
    for earlier, later in zip(smol, smol[1:]):  # every change is one step of the state machine
        assert (earlier, later) in {("loading", "ready"), ("ready", "unloading"), ("unloading", "unloaded"),
                                    ("unloaded", "loading"), ("loading", "failed"), ("failed", "loading")}
