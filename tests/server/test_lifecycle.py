"""Readiness when the model cannot be loaded: the process stays up and says why it is not ready (no model needed)."""

from __future__ import annotations

import time

from litestar.testing import TestClient

from spinfc.server.app import create_app


def refuse(name, dtype, device):
    raise FileNotFoundError(f"no weights for {name}")


def test_a_model_that_fails_to_load_is_reported_by_readyz() -> None:
    with TestClient(create_app(load_model=refuse)) as client:
        deadline = time.monotonic() + 60
        while client.get("/readyz").json()["error"]["code"] == "warming_up":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["error"]["code"] == "model_failed"
        assert "FileNotFoundError: no weights for gemma3-270m" in ready.json()["error"]["message"]
        assert client.get("/healthz").status_code == 200
        live = client.get("/livez")  # alive means: not failed; a failed model is worth a restart
        assert live.status_code == 503 and live.json()["error"]["code"] == "model_failed"
        assert client.get("/v1/packs").status_code == 200  # the packs were read before the model
        body = {"messages": [{"role": "user", "content": "x"}], "scoring": {"queries": []}}
        assert client.post("/v1/score", json=body).json()["error"]["code"] == "model_failed"
        assert client.get("/v1/models").json()["data"][0]["ready"] is False
