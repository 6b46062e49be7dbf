"""The enabled packs of a server: which packs a model gets, which are skipped and why, where each came from.

    registry = load_pack_registry(["./my-packs", "git+file:///srv/packs.git@v1#packs"], "gemma3-270m")
    registry.require("spinfc/moderation")   # the Pack, or a 400 pack_not_enabled
    registry.as_json()                      # the body of GET /v1/packs

Sources are read in order: the packs bundled with spinfc (`packs/`, unless `official=False`), then each source.
A pack written for another model is skipped with a log line; a pack in a reserved namespace (`spinfc/`) from a
source other than the bundled folder is skipped unless its namespace is allowed (an edited copy of a bundled
pack); a later source's pack with the id of an earlier one replaces it. A source that cannot be read, or holds a
pack file with an error, raises `PackSourceError`: the server refuses to start rather than serve without it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from spinfc.errors import CompileError, RequestError
from spinfc.frontend import Pack, load_pack, validate_packs
from spinfc.frontend.pack_files import pack_files
from spinfc.packsrc.sources import FetchedSource, PackSourceError, SourceSpec, fetch_source, parse_source
from spinfc.registry import base_model, cache_dir

RESERVED_NAMESPACES = ("spinfc",)  # and every namespace that starts like one: spinfc-official, spinfc.x, spin-fc
BUNDLED = "bundled"
log = logging.getLogger("spinfc.packs")


def bundled_folder() -> Path | None:
    """The `packs/` folder shipped with spinfc: inside the package when installed, beside it in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "packs", package.parent / "packs"):
        if folder.is_dir():
            return folder
    return None


@attrs.frozen
class EnabledPack:
    pack: Pack
    source: str  # "bundled" or the source as given (--packs)
    path: Path  # the pack file
    revision: str | None = None  # the git commit, for a git source


@attrs.frozen
class SkippedPack:
    id: str
    version: str
    models: tuple[str, ...]
    source: str
    path: Path
    reason: str


@attrs.frozen(eq=False)
class PackRegistry:
    model: str
    enabled: Mapping[str, EnabledPack]  # by pack id, in the order they were loaded
    skipped: tuple[SkippedPack, ...] = ()

    def get(self, pack_id: str) -> Pack | None:
        entry = self.enabled.get(pack_id)
        return entry.pack if entry else None

    def require(self, pack_id: str, param: str = "packs") -> Pack:
        """The enabled pack `pack_id`, or a `RequestError` (400, code `pack_not_enabled`) saying what is enabled
        and, when the pack was skipped, why."""
        if pack_id in self.enabled:
            return self.enabled[pack_id].pack
        why = next((s.reason for s in self.skipped if s.id == pack_id), None)
        known = ", ".join(self.enabled) or "none"
        raise RequestError(f"pack {pack_id!r} is not enabled on this server" + (f": {why}" if why else ""),
                           code="pack_not_enabled", param=param,
                           hint=f"the enabled packs are {known} (GET /v1/packs); the operator loads more with --packs")

    def as_json(self) -> dict:
        """GET /v1/packs: every enabled pack with where it came from, and every skipped one with why."""
        return {
            "object": "list",
            "model": self.model,
            "data": [_pack_json(e) for e in self.enabled.values()],
            "skipped": [{"id": s.id, "version": s.version, "models": list(s.models), "source": s.source,
                         "file": s.path.name, "reason": s.reason} for s in self.skipped],
        }


def _pack_json(entry: EnabledPack) -> dict:
    pack = entry.pack
    return {
        "id": pack.id, "object": "pack", "version": pack.version, "description": pack.description,
        "models": list(pack.models), "questions": len(pack.queries),
        "categories": [c.id for c in pack.categories],
        "decision": list(pack.decision.labels) if pack.decision else None,
        "source": entry.source, "file": entry.path.name, "revision": entry.revision,
    }


def load_pack_registry(sources: Sequence[str], model: str, *, official: bool = True,
                       allow_namespaces: Sequence[str] = (), cache: Path | None = None) -> PackRegistry:
    """Read the bundled packs (when `official`) and every source in order; keep those written for `model`.
    Raises `PackSourceError` for a source that cannot be read or holds a broken pack file."""
    if cache is None:
        cache = cache_dir()
    specs = [parse_source(text) for text in sources]  # every spec checked before anything is cloned
    if official:
        folder = bundled_folder()
        if folder is None:
            log.warning("official_error: the packs bundled with spinfc (packs/) are not installed; starting "
                        "without them")
        else:
            specs.insert(0, SourceSpec(BUNDLED, "bundled", str(folder)))
    enabled: dict[str, EnabledPack] = {}
    skipped: list[SkippedPack] = []
    for spec in specs:
        fetched = fetch_source(spec, cache)
        for path, pack in _read_packs(fetched):
            entry = EnabledPack(pack, spec.text, path, fetched.revision)
            reason = _skip_reason(pack, spec, model, allow_namespaces)
            if reason is None and pack.id in enabled:
                previous = enabled.pop(pack.id)
                skipped.append(_skipped(previous, f"replaced by the copy from {spec.text}"))
                log.info("pack %s from %s replaced by the copy from %s", pack.id, previous.source, spec.text)
            if reason is None:
                enabled[pack.id] = entry
            else:
                skipped.append(_skipped(entry, reason))
                log.info("pack %s from %s skipped: %s", pack.id, spec.text, reason)
    return PackRegistry(model, enabled, tuple(skipped))


def registry_from_settings(settings) -> PackRegistry:
    """`load_pack_registry` for a `spinfc.config.Settings`."""
    features = settings.features  # a quantized checkpoint gets its base model's packs
    return load_pack_registry(features.packs, base_model(settings.engine.model),
                              official=not features.no_official_packs, allow_namespaces=features.packs_allow_namespace)


def reserved_namespace(namespace: str) -> str | None:
    """The reserved namespace that `namespace` is or looks like (by prefix, whatever its case and its `-_.`
    separators: `spinfc-official`, `Spinfc.`, `spin_fc` are all `spinfc`), or None."""
    plain = re.sub(r"[-_.]", "", namespace.casefold())
    return next((reserved for reserved in RESERVED_NAMESPACES if plain.startswith(reserved)), None)


def _skip_reason(pack: Pack, spec: SourceSpec, model: str, allow_namespaces: Sequence[str]) -> str | None:
    namespace = pack.id.split("/", 1)[0]
    reserved = reserved_namespace(namespace)
    if spec.kind != "bundled" and reserved is not None and namespace not in allow_namespaces:
        like = "is" if namespace == reserved else f"looks like {reserved}/, which is"
        return (f"the namespace {namespace}/ {like} reserved for the packs bundled with spinfc; rename the pack, or "
                f"start with --packs-allow-namespace {namespace} to load this copy")
    if not pack.written_for(model):
        return f"written for {', '.join(pack.models)}, not {model}"
    return None


def _skipped(entry: EnabledPack, reason: str) -> SkippedPack:
    pack = entry.pack
    return SkippedPack(pack.id, pack.version, pack.models, entry.source, entry.path, reason)


def _read_packs(fetched: FetchedSource) -> list[tuple[Path, Pack]]:
    """Every pack of a fetched source (one file, or each *.toml of the folder, by name); a broken file, an empty
    folder or two packs with one id refuse the source, with every error (file:line:col)."""
    folder = fetched.folder
    if folder.is_dir():
        errors = validate_packs(folder)  # regular files only, sizes capped before anything is read
        if errors and not (fetched.spec.kind == "bundled" and errors[0].code == "no_packs"):
            _refuse(fetched.spec, errors)
        files, _ = pack_files(folder)
    else:
        files = [folder]
    packs = []
    for path in files:
        try:
            packs.append((path, load_pack(path)))
        except CompileError as error:
            _refuse(fetched.spec, [error])
    return packs


def _refuse(spec: SourceSpec, errors: list[CompileError]) -> None:
    shown = "\n".join(f"  {str(e).replace(chr(10), chr(10) + '  ')}" for e in errors[:10])
    more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
    raise PackSourceError(f"pack source {spec.text!r} cannot be loaded ({len(errors)} error"
                          f"{'s' if len(errors) != 1 else ''}); fix the pack files (spinfc packs validate) or "
                          f"drop the source:\n{shown}{more}")
