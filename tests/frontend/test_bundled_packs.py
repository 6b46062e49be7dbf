"""Each pack in packs/ loads, has what its job needs, and follows the house style of docs/packs.md."""

import re
from pathlib import Path

import pytest

from spinfc.frontend import load_pack, program_from_pack, validate_packs
from spinfc.frontend.pack import combinations
from spinfc.ir.nodes import OptionSlot, Placeholder, SlotRef, Text

PACKS = sorted((Path(__file__).parents[2] / "packs").glob("*.toml"))


def test_the_bundled_packs_are_there_and_valid():
    assert {p.stem for p in PACKS} >= {"support-triage", "review-sentiment", "moderation", "product-listings",
                                       "brand-safety", "entertainment", "intent-routing"}
    assert validate_packs(PACKS[0].parent) == []


@pytest.mark.parametrize("path", PACKS, ids=lambda p: p.stem)
def test_pack_follows_the_house_style(path):
    pack = load_pack(path)
    assert pack.id == f"spinfc/{path.stem}"
    assert pack.path == path
    assert set(pack.models) == {"gemma3-270m", "smollm2-135m"}
    assert pack.written_for("google/gemma-3-270m") and not pack.written_for("other/model")
    assert pack.presentation_before.endswith(":\n") and pack.presentation_after == ""
    for query in pack.queries:
        parts = query.template.parts
        assert isinstance(parts[0], Text) and parts[0].text.startswith("\n\n"), query.id
        assert isinstance(parts[-1], SlotRef) and isinstance(query.slot, OptionSlot), query.id
        assert isinstance(parts[-2], Text) and parts[-2].text.endswith("?\nAnswer:"), query.id
        texts = [o.text for o in query.slot.options]
        assert all(t.startswith(" ") and t == t.lower() for t in texts), query.id
        if len(texts) == 2 and set(texts) == {" yes", " no"}:
            assert texts == [" yes", " no"], query.id
        else:  # a label question lists its labels after a colon, in option order: "...: a, b, or c?"
            question = "".join(p.text for p in parts if isinstance(p, Text)).split("?\nAnswer:")[0]
            listed = re.split(r",\s*(?:or\s+)?|\s+or\s+", question.rsplit(": ", 1)[1])
            assert listed == [t.strip() for t in texts], query.id
        assert all(isinstance(p, (Text, Placeholder)) for p in parts[:-1])
    members = {m.question for c in pack.categories for m in c.members}
    assert members == {q.id for q in pack.queries}, "every question counts in some category"


def test_moderation_pack_size_and_decision():
    pack = load_pack(Path(PACKS[0].parent, "moderation.toml"))
    assert sum(len(combinations(q)) for q in pack.queries) >= 100  # the seed's moderation pack asks 106
    assert len(pack.categories) >= 20
    assert set(pack.decision.labels) == {"allow", "review", "block"}
    assert pack.decision.default == "allow" and pack.decision.rules[0].label == "block"
    assert {"harassment", "hate", "violent_threat", "sexual_explicit", "spam", "scam_phishing"} <= {
        c.id for c in pack.categories}
    assert sum(len(combinations(q)) for q in pack.queries) > len(pack.queries)  # it has grids


def test_every_combiner_is_used_by_some_bundled_pack():
    used = {c.combine for path in PACKS for c in load_pack(path).categories}
    assert used == {"max", "mean", "weighted_sum", "noisy_or"}


def test_program_from_pack():
    pack = load_pack(Path(PACKS[0].parent, "support-triage.toml"))
    program = program_from_pack(pack, ["I was charged twice.", "Where is my parcel?"], "gemma3-270m")
    assert [c.id for c in program.contents] == ["input-0", "input-1"]
    assert program.contents[1].text == "Where is my parcel?" and not program.contents[0].is_floor
    assert program.queries == pack.queries and program.model == "gemma3-270m"
    assert (program.present_before, program.present_after) == ("Customer support message:\n", "")
    with pytest.raises(TypeError):
        program_from_pack(pack, "one text, not a list", "gemma3-270m")
