"""`spinfc calibrate` on the hand-labelled support file (its first 40 rows: one of each kind of message) with the
support-triage pack, through the command a user runs: the calibrated pack and its provenance, thresholds that a
brute force over the scores and labels agrees with, the report's figures, a second run on the kept scores with
another target, and the warning for a pack calibrated on another engine."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spinfc.cli import main
from spinfc.frontend import load_pack
from spinfc.packsrc.calibrated import stale_calibrations

ROOT = Path(__file__).resolve().parents[2]
LABELLED = ROOT / "fixtures" / "labelled" / "support-triage.jsonl"


def test_a_pack_calibrated_on_another_engine_is_named():
    pack = load_pack(ROOT / "packs" / "support-triage.toml")
    assert stale_calibrations([pack], "fp_x") == []  # not calibrated: nothing to say
    assert stale_calibrations([], "fp_x") == []


def test_mistakes_stop_before_any_work(tmp_path, capsys):
    assert main(["calibrate", str(LABELLED), "--pack", "spinfc/support-triage", "--target", "accuracy"]) == 2
    assert "--target 'accuracy'" in capsys.readouterr().err
    assert main(["calibrate", str(LABELLED)]) == 2
    assert "--pack" in capsys.readouterr().err


def brute_f1(scores, labels):
    best = None
    for cut in sorted(set(scores), reverse=True):
        tp = sum(y for s, y in zip(scores, labels) if s >= cut)
        flagged = sum(s >= cut for s in scores)
        p, r = tp / flagged, tp / sum(labels)
        f1 = 2 * p * r / (p + r) if p + r else 0
        if best is None or f1 > best[0] + 1e-12:
            best = (f1, cut, p, r)
    return best


@pytest.mark.slow
def test_calibrate_the_support_pack(tmp_path, capsys):
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(LABELLED.read_text().splitlines(keepends=True)[:40]))
    report = tmp_path / "report"
    assert main(["calibrate", str(labelled), "--pack", "spinfc/support-triage", "--report", str(report),
                 "--labels", "refund,how_to,cannot_log_in", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^category\s+refund\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+6\s+40", out, re.M)

    pack = load_pack(report / "support-triage.toml")
    cal = pack.calibration
    scores = pq.read_table(report / "scores").sort_by("row")
    meta = pq.read_schema(sorted((report / "scores").glob("part-*.parquet"))[0]).metadata
    assert (cal.model, cal.rows, cal.target, cal.correction) == ("gemma3-270m", 40, "f1", "none")
    assert cal.system_fingerprint == meta[b"spinfc.system_fingerprint"].decode()
    assert cal.data_sha256 == hashlib.sha256(labelled.read_bytes()).hexdigest()
    assert [name for name, _ in cal.categories] == ["refund", "how_to"] and [n for n, _ in cal.questions] == [
        "cannot_log_in"]

    rows = [json.loads(line) for line in labelled.read_text().splitlines()]
    columns = {"refund": "support_triage__category__refund", "how_to": "support_triage__category__how_to",
               "cannot_log_in": "support_triage__cannot_log_in__yes__p"}
    chosen = dict(cal.categories) | dict(cal.questions)
    for label, column in columns.items():
        f1, cut, p, r = brute_f1(scores.column(column).to_pylist(), [row[label] for row in rows])
        assert chosen[label].threshold == pytest.approx(cut) and chosen[label].precision == pytest.approx(p, abs=1e-4)
        assert chosen[label].recall == pytest.approx(r, abs=1e-4) and chosen[label].support == sum(
            row[label] for row in rows)

    from matplotlib.image import imread

    page = (report / "index.html").read_text()
    for name in ("category-refund", "category-how_to", "question-cannot_log_in"):
        for kind in ("pr", "reliability"):
            figure = report / f"{kind}-{name}.png"
            assert f'src="{figure.name}"' in page and imread(figure).std() > 0.01
    assert "system_fingerprint" in page and cal.data_sha256 in page

    # the same scores again, another target; the calibrated pack, its fingerprint edited, is warned about
    moved = report / "other-engine.toml"
    moved.write_text((report / "support-triage.toml").read_text().replace(cal.system_fingerprint, "fp_elsewhere"))
    assert main(["calibrate", str(labelled), "--pack", str(moved), "--report", str(report), "--resume",
                 "--labels", "refund", "--target", "recall=0.5", "-o", str(tmp_path / "recall.toml"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "calibrated on another engine" in captured.err and "fp_elsewhere" in captured.err
    again = load_pack(tmp_path / "recall.toml").calibration
    assert again.target == "recall=0.5" and dict(again.categories)["refund"].recall >= 0.5
    assert again.system_fingerprint == cal.system_fingerprint
