"""Writes fixtures/labelled/support-triage.jsonl: the 200 messages of fixtures/support-messages.parquet
(scripts/make_bulk_fixture.py) with hand labels, the labelled file of `spinfc calibrate`'s worked example
(docs/calibration.md) and of its tests.

The labels were set by hand, by one spinfc developer, once per message kind (the 40 kinds below); the five
variants of a kind (another product, order, month, opening or sign-off) share its labels, so the file has 40
independent examples, not 200. No model chose any label. The rules, one column per category or question of
spinfc/support-triage:

    refund         the customer wants money back: asks for a refund, says a promised refund has not come, or
                   disputes a charge they say is wrong (a plan or shipping they did not owe, a chargeback)
    cancellation   asks to cancel an order or a subscription, or to close the account (pausing is not cancelling)
    delivery       an order arrived late, damaged, incomplete or wrong, went to the wrong address, or has not
                   arrived (changing an address is not a problem)
    technical      something does not work or shows an error, or the customer cannot log in
    security       someone else may be in the account, or the customer asks for their data to be deleted
    how_to         asks how to do something, or whether and where something can be done
    frustration    says they are unhappy: repeated contacts, "nobody", "worst", "disappointed", threats to leave
    cannot_log_in  (the question) says they cannot get into their account

    python scripts/make_labelled_fixture.py [OUTPUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_bulk_fixture import MESSAGES, rows  # noqa: E402

COLUMNS = ("refund", "cancellation", "delivery", "technical", "security", "how_to", "frustration", "cannot_log_in")
# the message kinds (indices into MESSAGES) labelled 1 in each column; every other kind is 0
POSITIVE = {
    "refund": {0, 1, 10, 18, 22, 31},
    "cancellation": {5, 8, 15, 26},
    "delivery": {1, 2, 9, 12, 20, 28, 33, 37},
    "technical": {4, 7, 13, 16, 21, 23, 32, 36, 38},
    "security": {6, 8, 25},
    "how_to": {3, 11, 19, 24, 27, 34},
    "frustration": {7, 17, 18, 22, 29, 37, 39},
    "cannot_log_in": {4, 21, 32},
}


def labelled() -> list[dict]:
    out = []
    for n, row in enumerate(rows()):
        kind = n % len(MESSAGES)
        out.append({**row, **{column: int(kind in POSITIVE[column]) for column in COLUMNS}})
    return out


def main() -> None:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "fixtures" / "labelled" /
                  "support-triage.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(row) + "\n" for row in labelled()))
    print(f"wrote {target}: {len(labelled())} rows, {len(COLUMNS)} label columns")


if __name__ == "__main__":
    main()
