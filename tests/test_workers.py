"""The fast set runs in workers (tests/conftest.py, pyproject's addopts), and a failing test's seed still comes back
from its worker with the command that replays it; a run with slow tests stays in one process. Each run here is a
pytest of its own on one small test file, under the project's configuration and conftest, with xdist its only
plugin (a few seconds a run on a loaded machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE = '''
import os


def test_draws(seed):
    assert seed < 0, f"worker {os.environ.get('PYTEST_XDIST_WORKER')}"
'''


def run(folder: Path, *args: str, seed: int | None = None) -> str:
    (folder / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (folder / "test_case.py").write_text(CASE)
    # not this run's seed, options or worker (a worker's PYTEST_XDIST_WORKER would pass to the run's own tests)
    env = {k: v for k, v in os.environ.items() if k != "SPINFC_TEST_SEED" and not k.startswith("PYTEST_")}
    env |= {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **({"SPINFC_TEST_SEED": str(seed)} if seed is not None else {})}
    command = [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(folder),
               "-p", "xdist", "-p", "no:cacheprovider", *args, "test_case.py"]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # the case fails, once
    return done.stdout


def test_a_failing_seed_comes_back_from_its_worker_and_replays(tmp_path):
    out = run(tmp_path, "-m", "not slow")
    assert re.search(r"worker gw\d", out), out
    seed = int(re.search(r"seed (\d+): replay with SPINFC_TEST_SEED=\1 pytest '.*test_case.py::test_draws'", out)[1])
    again = run(tmp_path, "-m", "not slow", seed=seed)
    assert f"seed {seed}: replay with SPINFC_TEST_SEED={seed}" in again and re.search(r"worker gw\d", again), again


def test_a_run_with_slow_tests_stays_in_one_process(tmp_path):
    assert "worker None" in run(tmp_path)
    assert "worker None" in run(tmp_path, "-m", "slow or not slow")
