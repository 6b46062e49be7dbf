"""A study's results: a markdown table on stdout, and the whole as JSON (to the path given, and under $OUT when
that is set, so a device run brings it back)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; floats with thousands separators and at most 3 decimals."""
    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}"
        return "-" if value is None else str(value)
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(data: object, path: Path | str | None = None, name: str | None = None) -> list[Path]:
    """`data` as indented JSON at `path`, and at $OUT/`name` when $OUT is set; the paths written."""
    targets = [Path(path)] if path else []
    if name and os.environ.get("OUT"):
        targets.append(Path(os.environ["OUT"]) / name)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=1, default=str))
    return targets


def write_text(text: str, name: str, path: Path | str | None = None) -> list[Path]:
    """`text` at `path`, and at $OUT/`name` when $OUT is set; the paths written."""
    targets = ([Path(path)] if path else []) + ([Path(os.environ["OUT"]) / name] if os.environ.get("OUT") else [])
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return targets
