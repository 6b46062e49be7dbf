"""`spinfc packs validate DIR`: every error of every pack file in a folder, not only the first."""

from __future__ import annotations

from pathlib import Path

from spinfc.errors import CompileError, PackError
from spinfc.frontend.pack_files import SOURCE_REFUSALS, pack_files, read_pack_text
from spinfc.frontend.pack_reader import read_pack
from spinfc.frontend.tomlpos import TomlPositions
from spinfc.ir.nodes import SourceLoc


def validate_packs(directory: str | Path) -> list[CompileError]:
    """Read each `*.toml` in `directory` (sorted by name); return all their errors, in file order.

    Besides each file's own errors: a folder that does not exist or holds no pack, a `*.toml` that is not a regular
    file (a link, a FIFO, a device) or is over the size cap, pack files too large together (pack_files.py: then
    nothing is read), and two files with the same pack id, are errors too. An empty list means every pack loads."""
    folder = Path(directory)
    if not folder.is_dir():
        return [
            PackError(
                f"{folder} is not a folder",
                SourceLoc(str(folder)),
                code="not_a_folder",
                hint="give the folder holding the pack files (*.toml)",
            )
        ]
    files, refused = pack_files(folder)  # regular files within the size caps; nothing read yet
    if any(error.code in SOURCE_REFUSALS for error in refused):
        return list(refused)
    if not files and not refused:
        return [
            PackError(
                f"no pack files (*.toml) in {folder}",
                SourceLoc(str(folder)),
                code="no_packs",
                hint="a pack is a .toml file; see docs/packs.md",
            )
        ]
    errors: list[CompileError] = list(refused)
    seen: dict[str, Path] = {}
    for path in files:
        pack, found = read_pack(path)
        errors.extend(found)
        if pack is None:
            continue
        if pack.id in seen:
            errors.append(
                PackError(
                    f"pack id {pack.id!r} is also the id of {seen[pack.id]}",
                    _id_loc(path),
                    code="duplicate_pack_id",
                    hint="give each pack its own id (namespace/name)",
                )
            )
        else:
            seen[pack.id] = path
    return errors


def _id_loc(path: Path) -> SourceLoc:
    text, _ = read_pack_text(path)  # read_pack has just read it
    return TomlPositions(text or "", str(path)).loc(("id",))
