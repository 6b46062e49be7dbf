"""The C allocator's hold on freed memory, for a long-running server (glibc's malloc; elsewhere nothing is done).

glibc gives each thread that meets a locked heap an arena of its own, up to eight per core, and keeps what is freed
in them for reuse: a server's threads (the engine's, the compile thread, the HTTP workers, torch's) free and
allocate tensors, token arrays and request objects in each other's arenas, and the resident size wanders by tens
of MB and steps up as arenas are added (benchmarks/NOTES.md, "memory over varied requests"). Two remedies, both
measured against served speed on the CPU (the same notes):

    limit_arenas   `mallopt(M_ARENA_MAX, n)`: threads started from now on share `n` arenas (what the environment
                   variable MALLOC_ARENA_MAX does, which glibc reads only at the process's start); `spinfc serve`
                   calls it first, unless MALLOC_ARENA_MAX is set (the operator's choice stands)
    trim           `malloc_trim(0)`: every arena's free pages handed back to the system; the engine calls it once
                   it has been idle for `IDLE_TRIM_SECONDS` (a pause between bursts, never between a burst's passes)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger("spinfc.engine")

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
SERVER_ARENAS = 2  # a server's arenas: one for the engine's thread, one shared by the rest
IDLE_TRIM_SECONDS = 0.25  # how long the engine waits with nothing to do before it hands free memory back


def _glibc():
    """The C library where it is glibc (it has malloc_trim), else None (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


GLIBC = _glibc()


def limit_arenas(count: int = SERVER_ARENAS) -> int | None:
    """Cap glibc's arenas at `count` for every thread that starts from now on; the cap in force (MALLOC_ARENA_MAX's
    where it is set, which this leaves alone), or None where the allocator is not glibc."""
    if GLIBC is None:
        return None
    if os.environ.get("MALLOC_ARENA_MAX"):
        return int(os.environ["MALLOC_ARENA_MAX"]) if os.environ["MALLOC_ARENA_MAX"].isdigit() else None
    if GLIBC.mallopt(M_ARENA_MAX, count) != 1:
        log.warning("mallopt(M_ARENA_MAX, %d) was refused: the allocator keeps its default arenas", count)
        return None
    return count


def trim() -> bool:
    """Hand every arena's free pages back to the system (`malloc_trim(0)`); whether any memory was released."""
    return bool(GLIBC.malloc_trim(0)) if GLIBC is not None else False
