"""`MediaPolicy`: which kinds of media a server reads, and the limits a part is checked against."""

from __future__ import annotations

import attrs

KINDS = ("image", "audio", "video")


@attrs.frozen
class MediaPolicy:
    """`kinds`: what requests may send (--media); `fetch_hosts`: hosts whose http(s) URLs are fetched (none by
    default: URLs are refused); the limits of the seed: --max-frames, --max-audio-seconds, --max-image-pixels, and
    the bytes of one fetched file (--max-fetch-bytes)."""

    kinds: frozenset[str] = frozenset(KINDS)
    max_frames: int = 1024
    max_audio_seconds: int = 600
    max_image_pixels: int = 50_000_000
    max_fetch_bytes: int = 20_000_000
    fetch_hosts: tuple[str, ...] = ()
    fetch_timeout: float = 10.0
    # an image this much longer than wide (or wider than long) is refused: a 100,000 x 1 image is no picture and
    # its resize to the tower's square would be all interpolation
    max_aspect: int = 200

    @classmethod
    def of(cls, features, limits) -> "MediaPolicy":
        """From the settings: the `[features]` media kinds and fetch hosts, the `[limits]` media limits."""
        return cls(kinds=frozenset(features.media_kinds()), max_frames=limits.max_frames,
                   max_audio_seconds=limits.max_audio_seconds, max_image_pixels=limits.max_image_pixels,
                   max_fetch_bytes=limits.max_fetch_bytes, fetch_hosts=tuple(features.media_fetch_hosts))

    def as_dict(self) -> dict:
        return {"kinds": sorted(self.kinds), "max_frames": self.max_frames,
                "max_audio_seconds": self.max_audio_seconds, "max_image_pixels": self.max_image_pixels,
                "max_fetch_bytes": self.max_fetch_bytes, "fetch_hosts": list(self.fetch_hosts)}
