"""Every bundled pack's golden fixtures on the embedded model (packs/golden/*.json, docs/packs.md): the categories
each clear-cut content must raise and must not raise. One model load shared by all the packs."""

import asyncio
from pathlib import Path

import pytest

from spinfc.bulk.golden import score_golden
from spinfc.frontend import load_pack
from spinfc.packsrc.golden import mismatches, read_golden

PACKS = Path(__file__).resolve().parents[2] / "packs"
GOLDEN = sorted((PACKS / "golden").glob("*.json"))


def test_every_pack_has_golden_fixtures():
    assert {p.stem for p in GOLDEN} == {p.stem for p in PACKS.glob("*.toml")}
    for path in GOLDEN:
        golden = read_golden(path)
        pack = load_pack(PACKS / f"{path.stem}.toml")
        assert golden.pack == pack.id and golden.fixtures and golden.model == "gemma3-270m"
        known = {c.id for c in pack.categories}
        for fixture in golden.fixtures:
            assert set(fixture.raises) | set(fixture.quiet) <= known
            assert fixture.raises or fixture.quiet
            assert not set(fixture.raises) & set(fixture.quiet)


@pytest.fixture(scope="module")
def shared_model():
    from spinfc.runtime.load.loader import load_default

    loaded = {}

    def load(name, dtype, device):
        key = (name, str(dtype), device)
        if key not in loaded:
            loaded[key] = load_default(name, dtype, device)
        return loaded[key]

    return load


@pytest.mark.slow
@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_fixtures(path, shared_model):
    golden = read_golden(path)
    pack = load_pack(PACKS / f"{path.stem}.toml")
    categories, labels = asyncio.run(score_golden(golden, pack, shared_model))
    found = mismatches(golden, categories, labels)
    shown = "\n".join(f"  {f.content[:60]!r}: " + ", ".join(f"{k} {v:.3f}" for k, v in c.items())
                      for f, c in zip(golden.fixtures, categories))
    assert not found, "\n".join(found) + "\nscores:\n" + shown
