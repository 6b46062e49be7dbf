"""What the media tests over the real interfaces share: one random-weight Gemma 4 snapshot with its towers
(snapshots.py), and one app serving it on the CPU (started once for the package: ~20 s on a shared CPU)."""

from __future__ import annotations

import pytest

from spinfc.config import Limits

from .served import serving
from .snapshots import gemma4_snapshot


@pytest.fixture(scope="package")
def gemma4_directory(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gemma4-served")
    gemma4_snapshot(directory)
    return directory


@pytest.fixture(scope="package")
def served(gemma4_directory):
    """The snapshot served in-process: every kind on, at most 8 frames a video."""
    with serving(gemma4_directory, Limits(max_frames=8)) as client:
        yield client
