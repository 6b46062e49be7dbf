"""score_pack: each combiner against its formula by hand, grids, the floor baseline, rule order, missing answers."""

from pathlib import Path

import pytest

from spinfc.frontend import load_pack
from spinfc.runtime.deliver.pack_scores import combine, lift, score_pack

PACK = """
id = "acme/scores"
version = "1.0.0"
description = "Scores test."
models = ["gemma3-270m"]

[[questions]]
id = "a"
template = "A?\\nAnswer:<?>"
options = [" yes", " no"]

[[questions]]
id = "b"
template = "B?\\nAnswer:<?>"
options = [" yes", " no"]

[[questions]]
id = "level"
template = "Level: low, mid, or high?\\nAnswer:<?>"
options = [" low", " mid", " high"]

[[questions]]
id = "grid"
template = "Does it {verb} the {thing}?\\nAnswer:<?>"
options = [" yes", " no"]
placeholders = { verb = ["like", "hate"], thing = ["x", "y"] }

[[categories]]
id = "top"
combine = "max"
members = [{ question = "a", option = " yes" }, { question = "b", option = " yes", weight = 0.5 }]

[[categories]]
id = "avg"
combine = "mean"
members = [{ question = "a", option = " yes", weight = 3 }, { question = "b", option = " yes" }]

[[categories]]
id = "expected"
combine = "weighted_sum"
members = [
    { question = "level", option = " low", weight = -1 },
    { question = "level", option = " high", weight = 1 },
]

[[categories]]
id = "either"
combine = "noisy_or"
members = [{ question = "a", option = " yes" }, { question = "b", option = " yes", weight = 0.5 }]

[[categories]]
id = "hates"
combine = "max"
members = [{ question = "grid", option = " yes", values = { verb = "hate" } }]

[[categories]]
id = "any_grid"
combine = "mean"
members = [{ question = "grid", option = " yes" }]

[[categories]]
id = "lifted"
baseline = "floor"
combine = "max"
members = [{ question = "a", option = " yes" }, { question = "b", option = " yes" }]

[decision]
default = "fine"

[[decision.rules]]
label = "both"
all = ["top >= 0.5", "either > 0.9"]

[[decision.rules]]
label = "one"
any = ["avg >= 0.7", "hates >= 0.8"]
"""


@pytest.fixture
def pack(tmp_path):
    path = Path(tmp_path, "scores.toml")
    path.write_text(PACK)
    return load_pack(path)


def answers(a: float, b: float, grid: dict[tuple[str, str], float], level=(0.2, 0.3, 0.5)):
    p = {
        ("a", ()): {" yes": a, " no": 1 - a},
        ("b", ()): {" yes": b, " no": 1 - b},
        ("level", ()): dict(zip((" low", " mid", " high"), level, strict=True)),
    }
    for (verb, thing), value in grid.items():
        # the values' order in the key does not matter
        p[("grid", (("thing", thing), ("verb", verb)))] = {" yes": value, " no": 1 - value}
    return p


GRID = {("like", "x"): 0.1, ("like", "y"): 0.2, ("hate", "x"): 0.3, ("hate", "y"): 0.6}
FLOOR = answers(0.5, 0.2, GRID)


def test_each_combiner_follows_its_formula(pack):
    scores = score_pack(pack, answers(0.6, 0.9, GRID), FLOOR)
    assert scores.score("top") == pytest.approx(max(0.6, 0.5 * 0.9))
    assert scores.score("avg") == pytest.approx((3 * 0.6 + 0.9) / 4)
    assert scores.score("expected") == pytest.approx(-0.2 + 0.5)
    assert scores.score("either") == pytest.approx(1 - (1 - 0.6) * (1 - 0.45))
    assert [name for name, _ in scores.categories] == [
        "top",
        "avg",
        "expected",
        "either",
        "hates",
        "any_grid",
        "lifted",
    ]


def test_grid_members(pack):
    scores = score_pack(pack, answers(0.6, 0.9, GRID), FLOOR)
    assert scores.score("hates") == pytest.approx(0.6)  # only the verb = hate cells
    assert scores.score("any_grid") == pytest.approx((0.1 + 0.2 + 0.3 + 0.6) / 4)  # every cell


def test_floor_baseline_counts_lift(pack):
    scores = score_pack(pack, answers(0.6, 0.9, GRID), FLOOR)
    assert scores.score("lifted") == pytest.approx(max((0.6 - 0.5) / 0.5, (0.9 - 0.2) / 0.8))
    below = score_pack(pack, answers(0.4, 0.1, GRID), FLOOR)
    assert below.score("lifted") == 0.0  # less than the floor adds nothing
    assert lift(0.7, 1.0) == 0.0 and lift(1.0, 0.0) == 1.0
    with pytest.raises(ValueError, match="floor"):
        score_pack(pack, answers(0.6, 0.9, GRID))


def test_rules_fire_in_order(pack):
    both = score_pack(pack, answers(0.95, 0.9, GRID), FLOOR)  # top 0.95, either 0.97: rule 0 (all) holds
    assert (both.label, both.rule) == ("both", 0)
    assert "top 0.950 >= 0.5" in both.reason and "either" in both.reason
    one = score_pack(pack, answers(0.8, 0.0, GRID), FLOOR)  # either 0.8, avg 0.6, hates 0.6: no rule holds
    assert one.score("either") < 0.9 and one.score("avg") == pytest.approx(0.6)
    assert (one.label, one.rule) == ("fine", None) and one.reason == "default: no rule fired"
    hates = score_pack(pack, answers(0.1, 0.0, {**GRID, ("hate", "y"): 0.85}), FLOOR)
    assert (hates.label, hates.rule) == ("one", 1)  # any: one condition is enough
    assert "hates 0.850 >= 0.8" in hates.reason and "avg" not in hates.reason


def test_a_missing_answer_names_the_question(pack):
    p = answers(0.6, 0.9, GRID)
    del p[("grid", (("thing", "y"), ("verb", "hate")))]
    with pytest.raises(KeyError, match="'grid'.*thing='y'"):
        score_pack(pack, p, FLOOR)


def test_combine_rejects_unknown_and_empty():
    with pytest.raises(ValueError):
        combine("median", [(0.5, 1.0)])
    with pytest.raises(ValueError):
        combine("max", [])


def test_bundled_moderation_pack_decides(tmp_path):
    pack = load_pack(Path(__file__).parents[2] / "packs" / "moderation.toml")
    from spinfc.frontend.pack import combinations

    def uniform(yes: float, override: dict[str, float] | None = None):
        override = override or {}
        return {
            (q.id, combo): {" yes": override.get(q.id, yes), " no": 1 - override.get(q.id, yes)}
            for q in pack.queries
            for combo in combinations(q)
        }

    floor = uniform(0.5)
    assert score_pack(pack, uniform(0.5), floor).label == "allow"  # nothing above the floor
    assert score_pack(pack, uniform(0.9), floor).label == "block"  # everything far above it
    threat = score_pack(pack, uniform(0.5, {"threat": 0.8}), floor)  # lift 0.6: review, not block
    assert (threat.label, threat.score("violent_threat")) == ("review", pytest.approx(0.6))
    assert score_pack(pack, uniform(0.5, {"threat": 0.95}), floor).label == "block"
