"""Which files of a folder are pack files, and reading one safely: regular files only, sizes capped before reading.

A pack source may come from someone else (a git repository), so nothing in it is trusted: a `*.toml` that is a
symbolic link (to `/dev/zero`, to a file outside the source), a FIFO (which would block the start), a device or a
folder is refused, and so is a file over `MAX_PACK_FILE_BYTES` or a folder whose pack files together pass
`MAX_SOURCE_BYTES`. Sizes are checked from `stat` before a byte is read, and a file is opened without following
a link and without blocking, then checked again on the open descriptor (it cannot be swapped in between).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from spinfc.errors import PackError
from spinfc.ir.nodes import SourceLoc

MAX_PACK_FILE_BYTES = 1_000_000  # the largest bundled pack is 10 KB
MAX_SOURCE_BYTES = 10_000_000  # every pack file of one folder together
MAX_PACK_FILES = 1_000
SOURCE_REFUSALS = ("too_many_pack_files", "source_too_large")  # codes of the errors that stop a folder being read


def pack_files(folder: Path) -> tuple[list[Path], list[PackError]]:
    """The `*.toml` entries of `folder` sorted by name, and an error for each that is not a regular file of at
    most `MAX_PACK_FILE_BYTES` (nothing is read); one error for the folder when its pack files are too many or
    too large together."""
    entries = sorted(folder.glob("*.toml"))
    if len(entries) > MAX_PACK_FILES:
        return [], [PackError(f"{len(entries):,} pack files in {folder}: at most {MAX_PACK_FILES:,} are read from "
                              "one source", SourceLoc(str(folder)), code="too_many_pack_files",
                              hint="split the packs over several folders (one --packs each)")]
    files, errors, total = [], [], 0
    for path in entries:
        try:
            info = path.lstat()
        except OSError as error:
            errors.append(_unreadable(path, error.strerror or str(error)))
            continue
        problem = file_problem(path, info)
        if problem is not None:
            errors.append(problem)
            continue
        files.append(path)
        total += info.st_size
    if total > MAX_SOURCE_BYTES:
        errors.append(PackError(f"the pack files of {folder} hold {total:,} bytes together, over the limit of "
                                f"{MAX_SOURCE_BYTES:,} for one source", SourceLoc(str(folder)),
                                code="source_too_large", hint="a pack is a few kilobytes of questions; split the "
                                "folder, or remove files that are not packs"))
    return files, errors


def file_problem(path: Path, info: os.stat_result) -> PackError | None:
    """Why the entry `info` (from lstat or fstat) cannot be a pack file, or None."""
    if stat.S_ISLNK(info.st_mode):
        return PackError("the pack file is a symbolic link; pack files are read only as regular files, so a "
                         "source cannot point outside itself", SourceLoc(str(path)), code="not_a_regular_file",
                         hint="put the file itself in the folder instead of a link to it")
    if not stat.S_ISREG(info.st_mode):
        kind = "folder" if stat.S_ISDIR(info.st_mode) else "FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "socket or special file"
        return PackError(f"the pack file is a {kind}, not a regular file", SourceLoc(str(path)),
                         code="not_a_regular_file", hint="a pack is a regular .toml file; rename or remove this entry")
    if info.st_size > MAX_PACK_FILE_BYTES:
        return _too_large(path, info.st_size)
    return None


def read_pack_text(path: Path) -> tuple[str | None, PackError | None]:
    """The text of the pack file at `path`, or the error saying why it cannot be one (not a regular file, over
    `MAX_PACK_FILE_BYTES`, unreadable, not UTF-8)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens, never blocks
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if path.is_symlink():  # O_NOFOLLOW refuses a link with ELOOP
            return None, file_problem(path, path.lstat())
        return None, _unreadable(path, error.strerror or str(error))
    try:
        problem = file_problem(path, os.fstat(fd))
        if problem is not None:
            return None, problem
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_PACK_FILE_BYTES + 1)  # a file that grew since fstat is still cut here
    except OSError as error:
        return None, _unreadable(path, error.strerror or str(error))
    finally:
        os.close(fd)
    if len(data) > MAX_PACK_FILE_BYTES:
        return None, _too_large(path, len(data))
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return None, _unreadable(path, f"not UTF-8 text ({error.reason} at byte {error.start})")


def _too_large(path: Path, size: int) -> PackError:
    return PackError(f"the pack file holds {size:,} bytes, over the limit of {MAX_PACK_FILE_BYTES:,} for one pack "
                     "file", SourceLoc(str(path)), code="pack_file_too_large",
                     hint="a pack is a few kilobytes of questions; split it into several packs")


def _unreadable(path: Path, reason: str) -> PackError:
    return PackError(f"cannot read the pack file: {reason}", SourceLoc(str(path)), code="unreadable",
                     hint="give the path of a UTF-8 .toml file")
