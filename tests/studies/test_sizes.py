"""Measurement kept lean (issue 46): benchmarks/ holds at most 5,000 lines of Python (an answered study is retired,
git keeps it), BENCHMARKS.md at most 400 lines of today's figures (the dated history is benchmarks/NOTES.md), with
the performance round's section near its top."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_BENCHMARK_LINES = 5_000
MAX_BENCHMARKS_MD_LINES = 400


def test_benchmarks_hold_at_most_5000_lines_of_python():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / "benchmarks").rglob("*.py")}
    total = sum(sizes.values())
    largest = ", ".join(f"{name} {n}" for name, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:8])
    assert total <= MAX_BENCHMARK_LINES, (
        f"benchmarks/ has {total:,} lines of Python, over {MAX_BENCHMARK_LINES:,}: retire a study whose question is "
        f"answered (benchmarks/NOTES.md records its figures; git keeps it) or move what studies share into "
        f"benchmarks/harness/. The largest: {largest}")


def test_benchmarks_md_is_todays_figures():
    lines = (ROOT / "BENCHMARKS.md").read_text().splitlines()
    assert len(lines) <= MAX_BENCHMARKS_MD_LINES, (
        f"BENCHMARKS.md has {len(lines)} lines, over {MAX_BENCHMARKS_MD_LINES}: it holds today's figures with their "
        "commands; move a superseded section, dated, to the end of benchmarks/NOTES.md")
    headings = [line for line in lines if line.startswith("## ")]
    assert headings and headings[0] == "## The performance round", (
        f"the first section of BENCHMARKS.md must be '## The performance round' (python -m benchmarks.perf_round "
        f"fills it), found {headings[:1]}")
