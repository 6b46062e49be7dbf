"""Suite-wide fixtures, and how the slow tests share what is expensive (CI runs the whole suite on 2 shared cores;
benchmarks/NOTES.md "CI time" has what each slow module costs).

`packaged_model(name)` / `reference_model(name)` (session): spinfc's stack of a packaged model (gemma3-270m,
smollm2-135m) and transformers' model of the same GGUF file, each loaded once per session (tests/packaged.py; read-
only: a test that changes a model loads its own). A server on a packaged model takes the same cache through
`create_app(settings, load_model=packaged.load_shared)`.

One server per module: a test module that needs a live server starts it in a module-scoped fixture (server/live.py's
`live_server`, or Litestar's `TestClient` around `create_app`) and every test of the module asks it; several fields of
one answer are checked from one module-scoped request (e.g. test_score.py's `seed_answer`), not one request per
field. Inputs that are checked alike go to the server in one request (`inputs`: scores are the same alone or
packed) and each parametrized test reads its own. A new slow test joins the module whose server it can use; one
that would repeat another test's coverage at a higher cost is not added.

`unfrozen` (every test): a server that reaches ready freezes the heap it started with out of the garbage collector
(`gc.freeze`, spinfc/server/service.py); in the test process that would keep every later test's cyclic garbage of
what was frozen, so each test ends with the heap unfrozen.

`seed`: tests on random inputs draw a fresh seed each run (so runs explore), or take `SPINFC_TEST_SEED` (so a
failure replays). A failing test's report names its seed and the command line that replays it, from a worker too.

Workers (`-n auto`, pyproject's addopts; pytest-xdist): a run that leaves the slow tests out (`-m "not slow"`, the
fast set) spreads its files over up to 4 worker processes (`--dist loadfile`: a module's tests and its module-scoped
fixtures stay in one); a run with slow tests (CI's whole suite, one slow module) runs in this process alone, so that
each packaged model is loaded once (several workers would each load every model their modules ask for). `-n N`
chooses for itself.
"""

from __future__ import annotations

import gc
import os
import random

import pytest
from _pytest.mark.expression import Expression

MOST_WORKERS = 4  # each collects the whole suite (~20 s of CPU, ~1 GB) before its first test
if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker a core: torch's threads would only contend (CPU time doubled)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before anything here imports torch; its subprocesses inherit it


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto`: one worker a core (at most MOST_WORKERS) where no slow test is selected, else none."""
    expression = config.option.markexpr
    slow_selected = not expression or Expression.compile(expression).evaluate(lambda name, **_: name == "slow")
    return 0 if slow_selected else min(MOST_WORKERS, len(os.sched_getaffinity(0)))


@pytest.fixture(autouse=True)
def unfrozen():
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def packaged_model():
    """`packaged_model(name)`: spinfc's stack of the packaged `name` (float32, CPU), shared by the session."""
    from packaged import load_shared

    return load_shared  # its defaults: float32 on the CPU


@pytest.fixture(scope="session")
def reference_model():
    """`reference_model(name)`: transformers' model of the packaged `name` (float32, eager), shared by the session."""
    from packaged import load_reference

    return load_reference


@pytest.fixture
def seed(request) -> int:
    value = int(os.environ["SPINFC_TEST_SEED"]) if "SPINFC_TEST_SEED" in os.environ else random.randrange(1 << 30)
    request.node.spinfc_seed = value
    return value


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    value = getattr(item, "spinfc_seed", None)
    if value is not None and report.failed:
        report.sections.append(("random seed", f"seed {value}: replay with SPINFC_TEST_SEED={value} "
                                               f"pytest '{item.nodeid}'"))
    return report
