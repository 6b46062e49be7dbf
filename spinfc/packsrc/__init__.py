"""Pack sources and the enabled-pack registry.

    parse_source(text) -> SourceSpec            fetch_source(spec, cache) -> FetchedSource
    load_pack_registry(sources, model, *, official=True, allow_namespaces=(), cache=None) -> PackRegistry
    registry_from_settings(settings) -> PackRegistry
    list_packs(sources, model, *, official=True, allow_namespaces=(), cache=None) -> str

A source that cannot be read raises `PackSourceError` (the server refuses to start; the CLI exits non-zero).
"""

from spinfc.packsrc.listing import format_registry, list_packs
from spinfc.packsrc.registry import (
    EnabledPack, PackRegistry, SkippedPack, bundled_folder, load_pack_registry, registry_from_settings,
)
from spinfc.packsrc.sources import FetchedSource, PackSourceError, SourceSpec, fetch_source, parse_source

__all__ = [
    "EnabledPack", "FetchedSource", "PackRegistry", "PackSourceError", "SkippedPack", "SourceSpec",
    "bundled_folder", "fetch_source", "format_registry", "list_packs", "load_pack_registry", "parse_source",
    "registry_from_settings",
]
