"""A pack's [calibration] block: read with positions, written back, `calibrated` conditions, and its errors."""

from pathlib import Path

import pytest

from spinfc.errors import PackError
from spinfc.frontend import load_pack
from spinfc.frontend.pack_calibration import Calibration, Threshold, with_calibration
from spinfc.frontend.pack_reader import read_pack

PACK = """id = "acme/refunds"
version = "1.0.0"
description = "Find refund requests."
models = ["gemma3-270m"]

[[questions]]
id = "refund_request"
template = "\\n\\nIs the customer asking for a refund?\\nAnswer:<?>"
options = [" yes", " no"]

[[categories]]
id = "money_back"
baseline = "floor"
combine = "max"
members = [{ question = "refund_request", option = " yes" }]

[decision]
default = "other"

[[decision.rules]]
label = "refunds"
any = ["money_back >= calibrated"]
"""

BLOCK = Calibration(model="gemma3-270m", system_fingerprint="fp_1234", data="labelled.jsonl", data_sha256="ab" * 32,
                    rows=40, date="2026-12-02", target="precision=0.9", correction="floor",
                    categories=(("money_back", Threshold(0.4125, 0.9, 0.5, 6)),),
                    questions=(("refund_request", Threshold(0.625, 1.0, 0.3333, 6)),))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "refunds.toml"
    path.write_text(text)
    return path


def test_the_block_round_trips_and_the_decision_reads_its_threshold(tmp_path):
    path = write(tmp_path, with_calibration(PACK, BLOCK))
    pack = load_pack(path)
    assert pack.calibration == BLOCK
    (rule,) = pack.decision.rules
    assert rule.conditions[0].threshold == pytest.approx(0.4125)
    again = with_calibration(path.read_text(), BLOCK)  # a second run replaces the block, it does not add one
    assert again.count("[calibration]") == 1 and load_pack(write(tmp_path, again)).calibration == BLOCK


def test_a_calibrated_condition_without_a_block_is_an_error_at_its_line(tmp_path):
    _, errors = read_pack(write(tmp_path, PACK))
    (error,) = errors
    assert error.code == "uncalibrated" and error.loc.line == PACK.splitlines().index(
        'any = ["money_back >= calibrated"]') + 1
    assert "spinfc calibrate" in error.hint


@pytest.mark.parametrize("edit, code", [
    (('target = "precision=0.9"', 'target = "accuracy"'), "invalid_value"),
    (('correction = "floor"', 'correction = "platt"'), "invalid_value"),
    (("[calibration.categories.money_back]", "[calibration.categories.nope]"), "unknown_category"),
    (("[calibration.questions.refund_request]", "[calibration.questions.nope]"), "unknown_question"),
    (("rows = 40", "rows = 40\nextra = 1"), "unknown_field"),
])
def test_block_mistakes_are_located(tmp_path, edit, code):
    text = with_calibration(PACK, BLOCK).replace(*edit)
    _, errors = read_pack(write(tmp_path, text))
    assert errors and errors[0].code == code and isinstance(errors[0], PackError)
    assert errors[0].loc.line > PACK.count("\n")  # in the block, not at the top of the file
