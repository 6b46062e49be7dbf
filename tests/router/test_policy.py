"""The router's decisions on stand-in apps (no model): load on demand, keep several resident when the budget holds
them, swap the least recently used idle one out when it does not, never unload a pinned one, unload after the TTL,
answer a failed load to its waiters and retry on the next request, and the models file's errors."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

import httpx
import pytest

from spinfc.config import ConfigError, Settings
from spinfc.router import create_router_app, memory, read_models
from spinfc.router.lifespan import AppLifespan
from spinfc.server.errors import ApiError

GIB = 2**30


class StandIn:
    """An ASGI app like a model's: a lifespan that 'loads' (or fails), and a route answering which model it is."""

    def __init__(self, settings: Settings, fail: bool = False, delay: float = 0.0) -> None:
        self.name = settings.engine.served_model_name[0]
        self.fail, self.delay = fail, delay
        self.state = types.SimpleNamespace(service=types.SimpleNamespace(status="loading", error=None,
                                                                         aliases=[], engine=None))
        self.stopped = False
        self.gate: asyncio.Event | None = None  # set: requests wait for it

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                    asyncio.get_running_loop().call_later(self.delay, self._loaded)
                else:
                    self.stopped = True
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await receive()
        if self.gate is not None:
            await self.gate.wait()
        body = f'{{"model": "{self.name}"}}'.encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    def _loaded(self):
        service = self.state.service
        service.status, service.error = ("failed", "the weights are gone") if self.fail else ("ready", None)


@pytest.fixture(autouse=True)
def steady_memory(monkeypatch):
    """A stand-in takes no memory, so what the router would measure across its load (the change in the process's
    resident set) is whatever else the process allocated meanwhile: a few pages once in a while, which replaced a
    slot's size below (1 GiB) by about 0 and let every model fit. Here nothing changes across a load, so each slot
    keeps the size the test gives it; tests/router/test_live.py measures a real load."""
    monkeypatch.setattr(memory, "in_use", lambda device: 0)


def write_models(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


MODELS = """
[router]
memory_gib = {memory}
load_timeout = {timeout}

[models.a]
model = "smollm2-135m"
ttl = {ttl}

[models.b]
model = "smollm2-135m"

[models.c]
model = "smollm2-135m"
"""


def router_app(tmp_path, memory=3, timeout=5, ttl=0, fail=(), sizes=None):
    settings = Settings()
    config = read_models(write_models(tmp_path, MODELS.format(memory=memory, timeout=timeout, ttl=ttl)), settings)
    apps = {}

    def create(model_settings):
        name = model_settings.engine.served_model_name[0]
        apps.setdefault(name, []).append(StandIn(model_settings, fail=name in fail))
        return apps[name][-1]

    app = create_router_app(settings, config, create)
    for name, slot in app.router.slots.items():  # what each "takes": as measured at an earlier load
        slot.memory_bytes = (sizes or {}).get(name, GIB)
    return app, apps


async def ask(client, name):
    return await client.post("/v1/score", json={"model": name, "inputs": []})


def states(app):
    return {name: slot.state for name, slot in app.router.slots.items()}


def run(test):
    async def main():
        return await test()
    return asyncio.run(main())


def client_of(app):
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://router")


def test_loads_on_demand_and_keeps_what_the_budget_holds(tmp_path):
    app, apps = router_app(tmp_path, memory=2.5)  # two of the three fit

    async def test():
        lifespan = AppLifespan(app)
        await lifespan.start()
        async with client_of(app) as client:
            assert states(app) == {"a": "unloaded", "b": "unloaded", "c": "unloaded"}
            assert (await ask(client, "a")).json() == {"model": "a"}
            assert (await ask(client, "b")).json() == {"model": "b"}
            assert states(app) == {"a": "ready", "b": "ready", "c": "unloaded"}  # both fit: neither unloaded
            await ask(client, "a")  # a used last: b is the least recently used
            assert (await ask(client, "c")).json() == {"model": "c"}
            assert states(app) == {"a": "ready", "b": "unloaded", "c": "ready"}
            assert apps["b"][0].stopped
        await lifespan.stop()
        assert all(a.stopped for versions in apps.values() for a in versions)

    run(test)


def test_a_pinned_model_is_never_swapped_out(tmp_path):
    app, apps = router_app(tmp_path, memory=1.5, timeout=3)  # one at a time

    async def test():
        lifespan = AppLifespan(app)
        await lifespan.start()
        async with client_of(app) as client:
            await ask(client, "a")
            apps["a"][0].gate = asyncio.Event()
            running = asyncio.create_task(ask(client, "a"))  # pins a
            await asyncio.sleep(0.1)
            refused = await ask(client, "b")  # needs a's room; a is pinned for longer than the load timeout
            assert refused.status_code == 503 and refused.headers["retry-after"]
            assert refused.json()["error"]["code"] == "model_loading"
            assert "held by a (1 in flight)" in refused.json()["error"]["message"]
            assert states(app)["a"] == "ready"
            apps["a"][0].gate.set()
            assert (await running).json() == {"model": "a"}
            # b's load goes on once a is idle; a's unload (its collection) and b's load can outlast the 3 s a
            # request waits on a loaded machine, so the client retries as the 503 says (failed once in workers)
            for _ in range(30):
                answer = await ask(client, "b")
                if answer.status_code != 503:
                    break
                await asyncio.sleep(float(answer.headers["retry-after"]))
            assert answer.json() == {"model": "b"}
            assert states(app) == {"a": "unloaded", "b": "ready", "c": "unloaded"}
        await lifespan.stop()

    run(test)


def test_idle_past_the_ttl_unloads(tmp_path, monkeypatch):
    monkeypatch.setattr("spinfc.router.router.TICK_S", 0.05)
    app, apps = router_app(tmp_path, ttl=0.3)

    async def test():
        lifespan = AppLifespan(app)
        await lifespan.start()
        events = app.router.subscribe()
        async with client_of(app) as client:
            await ask(client, "a")
            await ask(client, "b")
            for _ in range(100):  # the ttl is 0.3 s; an unload's collection can take a second on a loaded machine
                await asyncio.sleep(0.1)
                if states(app)["a"] == "unloaded":
                    break
            assert states(app) == {"a": "unloaded", "b": "ready", "c": "unloaded"}  # b has no ttl
        seen = []
        while not events.empty():
            event = events.get_nowait()
            seen.append((event["model"], event["status"]))
        assert seen == [("a", "loading"), ("a", "ready"), ("b", "loading"), ("b", "ready"), ("a", "unloading"),
                        ("a", "unloaded")]
        await lifespan.stop()

    run(test)


def test_a_failed_load_answers_its_waiters_and_the_next_request_retries(tmp_path):
    app, apps = router_app(tmp_path, fail={"b"})

    async def test():
        lifespan = AppLifespan(app)
        await lifespan.start()
        async with client_of(app) as client:
            first = await asyncio.gather(ask(client, "b"), ask(client, "b"))
            for answer in first:
                assert answer.status_code == 503
                assert answer.json()["error"]["code"] == "model_failed"
                assert "the weights are gone" in answer.json()["error"]["message"]
            assert len(apps["b"]) == 1  # one load for both waiters
            assert (await ask(client, "b")).status_code == 503
            assert len(apps["b"]) == 2  # the next request tried again
            assert states(app)["b"] == "failed"
            assert (await ask(client, "a")).json() == {"model": "a"}  # the others are not affected
        await lifespan.stop()

    run(test)


def test_a_request_names_a_configured_model(tmp_path):
    app, _ = router_app(tmp_path)

    async def test():
        lifespan = AppLifespan(app)
        await lifespan.start()
        async with client_of(app) as client:
            unknown = await ask(client, "gpt-4")
            assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "model_not_served"
            none = await client.post("/v1/score", json={"inputs": []})
            assert none.status_code == 400 and none.json()["error"]["code"] == "model_required"
            listed = (await client.get("/v1/models")).json()
            assert [(m["id"], m["status"]) for m in listed["data"]] == [("a", "unloaded"), ("b", "unloaded"),
                                                                        ("c", "unloaded")]
            assert (await client.get("/v1/models/b")).json()["id"] == "b"
            assert (await client.get("/v1/models/x")).status_code == 404
            loaded = await client.post("/models/load", json={"model": "c"})
            assert loaded.json() == {"model": "c", "status": "ready"}
            unloaded = await client.post("/models/unload", json={})
            assert [s["status"] for s in unloaded.json()] == ["unloaded"] * 3
            slots = (await client.get("/slots")).json()
            assert [s["model"] for s in slots] == ["a", "b", "c"]
        await lifespan.stop()

    run(test)


@pytest.mark.parametrize("text, says", [
    ("[models.a]\nttl = 3\n", "has no `model` key"),
    ('[models.a]\nmodel = "x"\nport = 9000\n', "this setting is the router's"),
    ('[models.a]\nmodel = "x"\ntoken_budgets = 9000\n', "unknown key 'token_budgets' in [models.a]"),
    ('[models.a]\nmodel = "x"\nttl = -1\n', "ttl must be a number of seconds"),
    ('[models.a]\nmodel = "x"\ntoken_budget = "big"\n', "[models.a] token_budget"),
    ('[router]\ndefault = "b"\n[models.a]\nmodel = "x"\n', "default = 'b' is not one of the models"),
    ('[router]\nmemory = 3\n[models.a]\nmodel = "x"\n', "unknown key 'memory' in [router]"),
    ("[routers]\n", "unknown table [routers]"),
    ("[router]\n", "no [models.NAME] table"),
    ("[models.a\n", "not valid TOML"),
])
def test_models_file_errors_name_the_table_and_key(tmp_path, text, says):
    with pytest.raises(ConfigError) as error:
        read_models(write_models(tmp_path, text), Settings())
    assert says in str(error.value)


def test_a_model_table_sets_that_model_alone(tmp_path):
    config = read_models(write_models(tmp_path, '[models.small]\nmodel = "smollm2-135m"\ntoken_budget = 1024\n'
                                      'extraction = false\n[models.big]\nmodel = "gemma3-270m"\n'), Settings())
    small, big = config.models["small"].settings, config.models["big"].settings
    assert (small.engine.token_budget, small.features.extraction) == (1024, False)
    assert (big.engine.token_budget, big.features.extraction) == (None, True)
    assert small.engine.served_model_name == ("small",) and config.default is None


def test_the_router_error_is_the_envelope():
    error = ApiError(400, "model_required", "name one")
    assert error.status == 400
