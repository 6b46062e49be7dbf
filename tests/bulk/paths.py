"""The fixtures of the bulk tests, wherever pytest runs from."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "support-messages.parquet"  # 200 support messages (scripts/make_bulk_fixture.py)
QUERIES = str(ROOT / "fixtures" / "bulk" / "queries.json")  # two queries: refund (yes/no), topic (4 options)
