"""Suite-wide fixtures.

`unfrozen` (every test): a server that reaches ready freezes the heap it started with out of the garbage collector
(`gc.freeze`, spinfc/server/service.py); in the test process that would keep every later test's cyclic garbage of
what was frozen, so each test ends with the heap unfrozen.

`seed`: tests on random inputs draw a fresh seed each run (so runs explore), or take `SPINFC_TEST_SEED` (so a
failure replays). A failing test's report names its seed and the command line that replays it.
"""

from __future__ import annotations

import gc
import os
import random

import pytest


@pytest.fixture(autouse=True)
def unfrozen():
    yield
    gc.unfreeze()


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
