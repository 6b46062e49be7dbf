"""Every stage `spinfc compile --emit` prints, for every pack in packs/ and every request in fixtures/, pinned
as text (syrupy): a change to the frontend, a pass or the printer shows as a readable diff of these snapshots.
Compiled with the default model's real tokenizer (gemma3-270m)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spinfc.cli import main
from spinfc.cli import compile_shapes
from spinfc.compiler import STAGES, compile, load_source
from spinfc.passes import PassContext
from spinfc.registry import DEFAULT_MODEL, load_tokenizer

REPO = Path(__file__).resolve().parents[2]
# the compiler is pinned on three packs of different shapes (labels, grids, 106 questions); every bundled pack is
# checked by `packs validate` and its golden fixtures (tests/packs)
PACKS = ["packs/moderation.toml", "packs/review-sentiment.toml", "packs/support-triage.toml"]
REQUESTS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "fixtures").glob("*.json"))
MESSAGES = [
    "I was charged twice for September. Please refund one of the charges, or I will cancel my subscription.",
    "The blender arrived quickly and works well, but it is louder than I expected for the price.",
]


def emit(capsys, monkeypatch, *argv: str) -> str:
    monkeypatch.chdir(REPO)  # paths in the output (source locations) stay relative
    assert main(["compile", *argv]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def test_there_are_packs_and_requests_to_pin():
    assert len(PACKS) >= 3 and REQUESTS


@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("source", PACKS + REQUESTS)
def test_stage(source, stage, capsys, monkeypatch, snapshot):
    assert emit(capsys, monkeypatch, source, "--emit", stage) == snapshot


@pytest.mark.parametrize("source", PACKS)
def test_pack_plan_with_messages(source, capsys, monkeypatch, snapshot):
    argv = [source, "--emit", "plan"] + [arg for message in MESSAGES for arg in ("--content", message)]
    assert emit(capsys, monkeypatch, *argv) == snapshot


@pytest.mark.parametrize("source", PACKS + REQUESTS)
def test_every_source_verifies_after_every_pass(source, monkeypatch):
    monkeypatch.chdir(REPO)
    contents = MESSAGES if source.endswith(".toml") else ()
    ctx = PassContext(tokenizer=load_tokenizer(DEFAULT_MODEL), shapes=compile_shapes("cpu", None, 128))
    program = compile(load_source(source, DEFAULT_MODEL, contents), ctx, verify=True)
    assert program.layouts and all(lay.reads for lay in program.layouts)
