"""A snapshot served in-process on the CPU, as the media tests over HTTP start it: every media kind on."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from litestar.testing import TestClient

from spinfc.config import EngineSettings, FeatureSettings, Limits, Settings
from spinfc.server.app import create_app


@contextlib.contextmanager
def serving(directory: Path, limits: Limits | None = None):
    """A client of the app serving `directory` (token budget 1024, blocks of 64, no warm-up), once it is ready."""
    settings = Settings(engine=EngineSettings(model=str(directory), device="cpu", token_budget=1024, block=64,
                                              warmup="none"),
                        features=FeatureSettings(media=("image,video,audio",)), limits=limits or Limits())
    with TestClient(create_app(settings), timeout=600) as client:
        for _ in range(600):
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.1)
        yield client
