"""One object owns each pass's launch size (issue 26): the pass shapes are built from the settings in one place
(`Shapes.for_settings`, through `Shapes.for_device`), the engine's `Scheduler` asks its `PassSizing` what the next
pass holds, the size it launches at and whether it waits, and the size decided on is the one the runner stages. Read
from the source, so a new place that computes a launch size or picks a default budget fails here."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.config import EngineSettings
from spinfc.passes.layout import pass_shape
from spinfc.runtime.schedule.sizing import PassSizing
from spinfc.shapes import Shapes

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"
# who calls what decides a launch: `for_device`, the shapes themselves (`for_settings`); `launch_for`, the
# scheduler's rule for a pass of queued units (runtime/schedule/gather.py), a laid-out pass (passes/layout.py `pass_shape`:
# the runner's staging and `assemble`) and `spinfc compile --emit launches` (compiler.py)
CALLERS = {"for_device": {"shapes.py"},
           "launch_for": {"runtime/schedule/gather.py", "passes/layout.py", "compiler.py"}}
DEFAULT_BUDGETS = {"CUDA_TOKEN_BUDGET", "CPU_TOKEN_BUDGET"}


def names(path: Path) -> tuple[set[str], set[str]]:
    """(what `path` calls, every name it reads)."""
    tree = ast.parse(path.read_text())
    called, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called.add(node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", ""))
        if isinstance(node, ast.Name):
            read.add(node.id)
        if isinstance(node, ast.alias):
            read.add(node.name)
    return called, read


SOURCES = {str(p.relative_to(PACKAGE)): names(p) for p in PACKAGE.rglob("*.py")}


def test_launch_sizes_are_decided_in_one_place_each() -> None:
    for function, expected in CALLERS.items():
        assert {name for name, (called, _) in SOURCES.items() if function in called} == expected, function


def test_the_default_budget_is_the_settings_alone() -> None:
    assert {name for name, (_, read) in SOURCES.items() if read & DEFAULT_BUDGETS} == {"config/__init__.py"}


def test_the_engine_asks_its_scheduler_and_the_scheduler_its_sizing() -> None:
    engine, scheduler = SOURCES["runtime/engine.py"][0], SOURCES["runtime/schedule/scheduler.py"][0]
    assert {"schedule", "deliver"} <= engine and not engine & {"next_pass", "full", "waits_for_more"}
    assert {"next_pass", "full", "waits_for_more", "longest_wait", "holds_prompts"} <= scheduler
    assert not (engine | scheduler) & {"launch_for", "launch_size", "used_rows", "round_up", "fill",
                                       "room_for_one_more"}


def test_the_shapes_of_the_settings_are_the_devices() -> None:
    cpu = EngineSettings(device="cpu")
    assert Shapes.for_settings(cpu) == Shapes.for_device("cpu", 2048, 128)
    cuda = EngineSettings(device="cuda:0", block=64, pass_sizes=2)
    assert Shapes.for_settings(cuda) == Shapes.for_device("cuda:0", 16384, 64, 2)
    assert Shapes.for_settings(EngineSettings(device="cpu", token_budget=512)).budget == 512


item = st.tuples(st.integers(1, 6000), st.integers(1, 400), st.integers(1, 2000))


@settings(max_examples=200, deadline=None)
@given(st.lists(item, min_size=1, max_size=12), st.sampled_from([1, 2, 4, 8]))
def test_the_scheduler_decides_the_size_the_runner_stages(items, sizes) -> None:
    shapes = Shapes.for_device("cuda:0", 19200, 64, sizes)
    units = [SimpleNamespace(segment=SimpleNamespace(length=n, rows=r, read_count=k)) for n, r, k in items]
    launch = PassSizing(shapes).launch(units)
    chosen = [units[i] for i in PassSizing(shapes).next_pass([SimpleNamespace(solo=False, **vars(u)) for u in units])]
    if len(chosen) == len(units):  # they fit one pass: its size is the one staged
        staged = pass_shape([n for n, _, _ in items], sum(r for _, r, _ in items), sum(k for _, _, k in items), shapes)
        assert launch == staged
    else:
        assert launch is None
