"""A pack's golden fixtures: clear-cut contents with the categories they must and must not raise on one model.

    packs/golden/moderation.json
    {"pack": "spinfc/moderation", "model": "gemma3-270m", "threshold": 0.3,
     "fixtures": [{"content": "...", "raises": ["scam_phishing"], "quiet": ["harassment", "hate"]}]}

A category raises on a content when its score is at least `threshold`; `quiet` ones stay below it. The expected
categories are what the model was seen to do on contents chosen so that a person agrees (docs/packs.md, Golden
fixtures): a fixture pins the pack's behaviour on that model, so a change to a question, a weight or the engine that
moves a clear case is caught. `bulk.golden.score_golden` runs them through the bulk job's engine transport.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs


@attrs.frozen
class Fixture:
    content: str
    raises: tuple[str, ...]
    quiet: tuple[str, ...]
    label: str | None = None  # the decision it must give, when given


@attrs.frozen
class Golden:
    pack: str
    model: str
    threshold: float
    fixtures: tuple[Fixture, ...]
    path: Path


def read_golden(path: str | Path) -> Golden:
    """The golden file at `path`; ValueError naming the file and the key for a malformed one."""
    path = Path(path)
    data = json.loads(path.read_text())
    try:
        fixtures = tuple(Fixture(f["content"], tuple(f.get("raises", ())), tuple(f.get("quiet", ())), f.get("label"))
                         for f in data["fixtures"])
        return Golden(data["pack"], data["model"], float(data["threshold"]), fixtures, path)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path}: a golden file has pack, model, threshold and fixtures [{{content, raises, "
                         f"quiet}}]: {error!r}") from None


def mismatches(golden: Golden, categories: Sequence[Mapping[str, float]], labels: Sequence[str | None]) -> list[str]:
    """What differs from `golden`, given each fixture's category scores and decision; [] when all hold."""
    found = []
    for k, (fixture, scores, label) in enumerate(zip(golden.fixtures, categories, labels, strict=True)):
        shown = fixture.content[:50]
        for category in fixture.raises:
            if scores[category] < golden.threshold:
                found.append(f"{golden.path.name} fixture {k} ({shown!r}): {category} {scores[category]:.3f} "
                             f"should be >= {golden.threshold:g}")
        for category in fixture.quiet:
            if scores[category] >= golden.threshold:
                found.append(f"{golden.path.name} fixture {k} ({shown!r}): {category} {scores[category]:.3f} "
                             f"should be < {golden.threshold:g}")
        if fixture.label is not None and label != fixture.label:
            found.append(f"{golden.path.name} fixture {k} ({shown!r}): decision {label!r}, expected {fixture.label!r}")
    return found
