"""What the media tests over the real interfaces share: one random-weight Gemma 4 snapshot with its towers
(snapshots.py), and one app serving it on the CPU (started once for the package: ~20 s on a shared CPU)."""

from __future__ import annotations

import time

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, FeatureSettings, Limits, Settings
from spinfc.server.app import create_app

from .snapshots import gemma4_snapshot


@pytest.fixture(scope="package")
def gemma4_directory(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gemma4-served")
    gemma4_snapshot(directory)
    return directory


@pytest.fixture(scope="package")
def served(gemma4_directory):
    """The snapshot served in-process: every kind on, at most 8 frames a video."""
    settings = Settings(engine=EngineSettings(model=str(gemma4_directory), device="cpu", token_budget=1024, block=64,
                                              warmup="none"),
                        features=FeatureSettings(media=("image,video,audio",)), limits=Limits(max_frames=8))
    with TestClient(create_app(settings), timeout=600) as client:
        for _ in range(600):
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.1)
        yield client
