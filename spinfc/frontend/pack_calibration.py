"""A pack's `[calibration]` block: the thresholds `spinfc calibrate` chose, and on what (docs/calibration.md).

    [calibration]
    model = "gemma3-270m"
    system_fingerprint = "fp_3f2a..."          # the engine the scores came from
    data = "fixtures/labelled/moderation.jsonl"
    data_sha256 = "9c1e..."
    rows = 96
    date = "2026-12-02"
    target = "f1"                              # "f1", "precision=0.9" or "recall=0.8"
    correction = "none"                        # "none", or "floor": questions divided by their content-free prior

    [calibration.categories.scam_phishing]
    threshold = 0.42
    precision = 0.83
    recall = 0.71
    support = 7

    [calibration.questions.threat]            # the question's first option (" yes")
    threshold = 0.61
    ...

A decision condition may then say `"scam_phishing >= calibrated"`: the number is the category's calibrated
threshold. `with_calibration(text, block)` puts a new block in a pack file's text in place of the old one.
"""

from __future__ import annotations

import re

from attrs import frozen

from spinfc.frontend.fields import Fields

CORRECTIONS = ("none", "floor")
TARGET = re.compile(r"f1|(precision|recall)=(0(?:\.\d+)?|1(?:\.0+)?)")
PROVENANCE = ("model", "system_fingerprint", "data", "data_sha256", "rows", "date", "target", "correction")


@frozen
class Threshold:
    threshold: float
    precision: float
    recall: float
    support: int  # labelled positives


@frozen
class Calibration:
    model: str
    system_fingerprint: str
    data: str
    data_sha256: str
    rows: int
    date: str
    target: str
    correction: str
    categories: tuple[tuple[str, Threshold], ...] = ()
    questions: tuple[tuple[str, Threshold], ...] = ()

    def category(self, category_id: str) -> Threshold | None:
        return dict(self.categories).get(category_id)


def read_calibration(f: Fields, categories: set[str], questions: set[str]) -> Calibration | None:
    c = f.table("calibration", "calibration", "{ model = ... }", default=None)
    if c is None:
        return None
    c.check_keys((*PROVENANCE, "categories", "questions"))
    text = {key: c.string(key, key, '"..."') for key in PROVENANCE if key != "rows"}
    rows = c.number("rows", "row count", "96")
    if not TARGET.fullmatch(text["target"]):
        c.fail("target", f"unknown target {text['target']!r}", code="invalid_value",
               hint='use "f1", "precision=0.9" or "recall=0.8"')
    if text["correction"] not in CORRECTIONS:
        c.fail("correction", f"unknown correction {text['correction']!r}", code="invalid_value",
               hint='use "none" or "floor" (each question divided by its content-free prior)')
    return Calibration(**text, rows=int(rows), categories=_thresholds(c, "categories", categories),
                       questions=_thresholds(c, "questions", questions))


def _thresholds(c: Fields, key: str, known: set[str]) -> tuple[tuple[str, Threshold], ...]:
    table = c.table(key, key, "{ violence = { threshold = 0.5, ... } }", default=None)
    if table is None:
        return ()
    out, noun = [], {"categories": "category", "questions": "question"}[key]
    for name in table.data:
        if name not in known:
            table.fail(name, f"the pack has no {noun} {name!r}", code=f"unknown_{noun}", at_key=True,
                       hint=f"calibrate the pack's own {key}: run spinfc calibrate again on this pack")
        t = table.table(name, "threshold", "{ threshold = 0.5, precision = 0.8, recall = 0.7, support = 12 }")
        t.check_keys(("threshold", "precision", "recall", "support"))
        out.append((name, Threshold(*(t.number(k, k, "0.5") for k in ("threshold", "precision", "recall")),
                                    int(t.number("support", "support", "12")))))
    return tuple(out)


def calibration_toml(cal: Calibration) -> str:
    """The block as TOML text, as `spinfc calibrate` writes it (read back by `read_calibration`)."""
    lines = ["[calibration]"]
    for key in PROVENANCE:
        value = getattr(cal, key)
        lines.append(f"{key} = {value}" if key == "rows" else f"{key} = {_quote(value)}")
    for kind, entries in (("categories", cal.categories), ("questions", cal.questions)):
        for name, t in entries:
            # the threshold in full (repr): rounded, it could pass over a score it was chosen at
            lines += ["", f"[calibration.{kind}.{name}]", f"threshold = {t.threshold!r}",
                      f"precision = {t.precision:.4f}", f"recall = {t.recall:.4f}", f"support = {t.support}"]
    return "\n".join(lines) + "\n"


def with_calibration(text: str, cal: Calibration) -> str:
    """`text` (a pack file) with its `[calibration]` tables removed and the new block appended at the end."""
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?$", line)
        if header:
            inside = header[1].split(".")[0].strip("\"' ") == "calibration"
        if not inside:
            kept.append(line)
    body = "".join(kept).rstrip("\n")
    return f"{body}\n\n# ---- calibration (written by spinfc calibrate) {'-' * 62}\n\n{calibration_toml(cal)}"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
