"""`spinfc packs list [--packs SRC]... [--model M]`: what a server would enable, offline, as text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spinfc.packsrc.registry import PackRegistry, load_pack_registry
from spinfc.registry import DEFAULT_MODEL


def list_packs(sources: Sequence[str], model: str | None = None, *, official: bool = True,
               allow_namespaces: Sequence[str] = (), cache: Path | None = None) -> str:
    """The packs `spinfc serve MODEL --packs SRC...` would enable and skip, with where each came from and why a
    pack is skipped (the same registry as GET /v1/packs). Raises `PackSourceError` for a source that cannot be
    read: the same refusal the server would give."""
    registry = load_pack_registry(sources, model or DEFAULT_MODEL, official=official,
                                  allow_namespaces=allow_namespaces, cache=cache)
    return format_registry(registry)


def format_registry(registry: PackRegistry) -> str:
    """A registry as text: one line per enabled pack (id, version, questions, source and file), then the
    skipped ones with their reasons."""
    lines = [f"enabled for {registry.model}: {_count(len(registry.enabled), 'pack')}"]
    rows = [(e.pack.id, e.pack.version, _count(len(e.pack.queries), "question"), _origin(e.source, e.path, e.revision))
            for e in registry.enabled.values()]
    lines += _table(rows) or ["  (none)"]
    if registry.skipped:
        lines.append(f"skipped: {len(registry.skipped)}")
        lines += _table([(s.id, s.version, _origin(s.source, s.path, None), s.reason) for s in registry.skipped])
    return "\n".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _origin(source: str, path: Path, revision: str | None) -> str:
    at = f" @ {revision[:12]}" if revision else ""
    return f"{source}{at} ({path.name})"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
