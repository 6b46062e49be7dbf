"""Whether a weights file is whole, told before it is read: a truncated or corrupt file is one located line
("model.safetensors: truncated at byte N of M; re-download it"), never a library's traceback from deep inside a
reshape.

    check_safetensors(path)   its 8-byte header length, its JSON header, and the file's size against the end of
                              the last tensor the header places
    reading_gguf(path)        wraps the GGUF reader: a file it cannot parse (truncated, zeroed) is the same kind of
                              line, with the file's size and what the reader said
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path

from spinfc.errors import CorruptWeights

HEADER_LIMIT = 100 << 20  # safetensors' own bound on its JSON header


def check_safetensors(path: Path) -> None:
    """Raise CorruptWeights unless `path` is a whole safetensors file."""
    size = path.stat().st_size
    with open(path, "rb") as stream:
        head = stream.read(8)
        if len(head) < 8:
            raise CorruptWeights(f"{path.name}: truncated at byte {size:,} of at least 8 (its header length); "
                                 "re-download it")
        (length,) = struct.unpack("<Q", head)
        if not 0 < length <= HEADER_LIMIT:
            raise CorruptWeights(f"{path.name}: not a safetensors file (a header of {length:,} bytes); re-download it")
        if size < 8 + length:
            raise CorruptWeights(f"{path.name}: truncated at byte {size:,} of at least {8 + length:,} (its header); "
                                 "re-download it")
        try:
            header = json.loads(stream.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CorruptWeights(f"{path.name}: its header is not JSON (the file is corrupt); re-download it") from None
    ends = [entry["data_offsets"][1] for key, entry in header.items()
            if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry]
    expected = 8 + length + max(ends, default=0)
    if size < expected:
        raise CorruptWeights(f"{path.name}: truncated at byte {size:,} of {expected:,}; re-download it")


@contextlib.contextmanager
def reading_gguf(path: Path) -> Iterator[None]:
    """Turn what the GGUF reader raises on a file that is not whole into CorruptWeights."""
    try:
        yield
    except (ValueError, IndexError, KeyError, struct.error, OSError, UnicodeDecodeError) as error:
        if isinstance(error, CorruptWeights):
            raise
        size = path.stat().st_size
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CorruptWeights(f"{path.name}: not a whole GGUF file ({size:,} bytes; the reader says: {reason}); "
                             "re-download it") from None
