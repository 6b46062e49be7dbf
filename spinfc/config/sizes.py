"""A size in bytes written the way people write one: `24GiB`, `24 GiB`, `24GB`, `24G`, `1.5TiB` or a plain number of
bytes. The IEC units (KiB, MiB, GiB, TiB) and the bare letters (K, M, G, T, as Docker and `free -g` read them) are
powers of 1,024; the SI units (KB, MB, GB, TB) powers of 1,000, as a card's maker counts (a "24 GB" card)."""

from __future__ import annotations

import re

UNITS = {"": 1, "b": 1, **{f"{p}ib": 1 << (10 * i) for i, p in enumerate("kmgt", start=1)},
         **{p: 1 << (10 * i) for i, p in enumerate("kmgt", start=1)},
         **{f"{p}b": 1000**i for i, p in enumerate("kmgt", start=1)}}
SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)
EXAMPLE = "24GiB (or 24GB, 24G, or bytes)"


def parse_size(text: str) -> int:
    """Bytes of `text`; raises ValueError saying what a size looks like."""
    match = SIZE.fullmatch(text)
    unit = match and UNITS.get(match[2].lower())
    if not unit:
        raise ValueError(f"{text!r} is not a size: write a number and a unit, e.g. {EXAMPLE}")
    value = int(float(match[1]) * unit)
    if value <= 0:
        raise ValueError(f"{text!r} is not a size above 0: e.g. {EXAMPLE}")
    return value


def gib(size: int) -> str:
    """`size` bytes in GiB, as the messages print them (one decimal; MiB below a tenth of a GiB)."""
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 // 10 else f"{size / 2**20:.1f} MiB"
