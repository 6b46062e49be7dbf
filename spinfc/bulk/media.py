"""Media columns of a bulk job: --image-column, --audio-column, --video-column name columns whose values are a
file's path or an http(s) URL (a video's value may also be a list of frames, images each). Each row's values are
read here, under the policy `spinfc serve` applies to a request's media:

    a path      relative to the INPUT's folder; read only inside a --media-root folder (default: the INPUT's
                folder; links are followed before the check), at most --max-fetch-bytes
    a URL       fetched only from a --media-fetch-hosts host (none by default), at most --max-fetch-bytes, 10 s
    the file    decoded and checked by the engine's read-media pass against --max-image-pixels, --max-frames and
                --max-audio-seconds (spinfc/media/decode.py), as the server checks it

Anything refused (a path outside the roots, a file that is not there, a URL of a host not allowed, a fetch that
failed, a file over the limit) is that row's error (its `error_code`: the server's code where there is one), never
the job's: `media_of(row)` returns the row's sources or its `RowError`.
"""

from __future__ import annotations

import argparse

from collections.abc import Sequence
from pathlib import Path

import attrs

from spinfc.bulk.errors import RowError
from spinfc.bulk.readers import Row, has_media
from spinfc.client.media import sniff
from spinfc.media.errors import MediaError
from spinfc.media.fetch import fetched
from spinfc.media.parts import MediaSource
from spinfc.media.policy import MediaPolicy

FLAGS = {"image": "--image-column", "audio": "--audio-column", "video": "--video-column"}
AUDIO = ("audio/wav", "audio/flac", "audio/ogg", "audio/mp3")


@attrs.frozen
class MediaColumns:
    """`columns`: (kind, column name) in the order their media follow the text; `base`: the INPUT's folder, where
    relative paths start; `roots`: the folders files may be read from (resolved)."""

    columns: tuple[tuple[str, str], ...]
    base: Path
    roots: tuple[Path, ...]
    policy: MediaPolicy

    @classmethod
    def of(cls, columns: Sequence[tuple[str, str]], input_path: str, roots: Sequence[str],
           policy: MediaPolicy) -> "MediaColumns":
        source = Path(input_path)
        base = (source if source.is_dir() else source.parent).resolve()
        return cls(tuple(columns), base, tuple(Path(r).resolve() for r in roots) or (base,), policy)

    @property
    def flags(self) -> dict[str, str]:
        """column name -> its flag, for the reader's missing-column error."""
        return {name: FLAGS[kind] for kind, name in self.columns}

    def resolve(self, rows: Sequence[Row]) -> list[Row]:
        """`rows` with their media read (`sources`), or, for a row whose media cannot be, its problem set. Reads
        files and fetches URLs: run it off the event loop."""
        out = []
        for row in rows:
            if row.problem is not None or not has_media(row.media):
                out.append(row)
                continue
            sources = self.media_of(row.media)
            out.append(attrs.evolve(row, problem=sources) if isinstance(sources, RowError) else
                       attrs.evolve(row, sources=sources))
        return out

    def media_of(self, values: tuple) -> tuple[MediaSource, ...] | RowError:
        """The sources of one row's media values (in column order; empty values skipped), or why not."""
        sources = []
        try:
            for (kind, column), value in zip(self.columns, values):
                if value in (None, "", []):
                    continue
                if kind == "video" and isinstance(value, list):
                    frames = tuple(self._one("image", f"{column}[{i}]", v) for i, v in enumerate(value))
                    sources.append(MediaSource("video", column, frames=frames))
                else:
                    sources.append(self._one(kind, column, value))
        except MediaError as error:
            return RowError(error.code, f"{error.param}: {error.message} ({error.hint})")
        return tuple(sources)

    def _one(self, kind: str, column: str, value) -> MediaSource:
        if not isinstance(value, str):
            raise MediaError(f"holds {type(value).__name__}, not a path or URL", code="invalid_media_path",
                             param=column, hint="write the file's path or http(s) URL in the column")
        if value.startswith(("http://", "https://")):
            source = fetched(MediaSource(kind, column, url=value), self.policy)
        else:
            source = MediaSource(kind, column, data=self._read(column, value))
        mime = sniff(source.data)
        if kind == "audio" and mime not in AUDIO:
            raise MediaError(f"{value} is not audio spinfc reads", code="unsupported_media", status=415,
                             param=column, hint="give a WAV, FLAC, OGG or MP3 file")
        return attrs.evolve(source, url=None, mime=mime if mime and mime.startswith(f"{kind}/") else None)

    def _read(self, column: str, value: str) -> bytes:
        path = (self.base / value).resolve()  # an absolute value stays as it is; links are followed
        if not any(path.is_relative_to(root) for root in self.roots):
            raise MediaError(f"{value} is outside the folders media are read from "
                             f"({', '.join(map(str, self.roots))})", code="media_path_refused", param=column,
                             hint="move the file under one, or name its folder with --media-root DIR")
        if not path.is_file():
            raise MediaError(f"no file {value} (looked for {path})", code="media_not_found", param=column,
                             hint="check the path: a relative one starts at the INPUT's folder")
        size = path.stat().st_size
        if size > self.policy.max_fetch_bytes:
            raise MediaError(f"{value} has {size:,} bytes, over the limit of {self.policy.max_fetch_bytes:,}",
                             code="max_fetch_bytes_exceeded", status=413, param=column,
                             hint="send a smaller file, or raise --max-fetch-bytes")
        data = path.read_bytes()
        if not data:
            raise MediaError(f"{value} is empty", code="empty_media", param=column, hint="give a file with its bytes")
        return data


def media_columns(args: argparse.Namespace):
    """The job's media columns and the policy they are read under (the server's, from the flags)."""
    columns = [(kind, getattr(args, f"{kind}_column")) for kind in ("image", "audio", "video")
               if getattr(args, f"{kind}_column", None)]
    policy = MediaPolicy(max_frames=args.max_frames, max_audio_seconds=args.max_audio_seconds,
                         max_image_pixels=args.max_image_pixels, max_fetch_bytes=args.max_fetch_bytes,
                         fetch_hosts=tuple(host.lower() for host in args.media_fetch_hosts))
    return MediaColumns.of(columns, args.input, args.media_root, policy)
