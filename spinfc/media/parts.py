"""`MediaSource`: one image, audio clip or video as a request sent it, before anything is decoded."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Literal

import attrs

from spinfc.media.errors import MediaError

Kind = Literal["image", "audio", "video"]
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w-]+=[^;,]*)*)(?P<b64>;base64)?,", re.I)


@attrs.frozen
class MediaSource:
    """`data` (the file's bytes) or `url` (an http(s) URL, fetched by the read-media pass where allowed); `frames`
    for a video sent as a list of images (each a `MediaSource` of kind image); `mime` the declared type (a data
    URL's, or the audio `format` as audio/<format>); `param` the JSON path of the part, for errors."""

    kind: Kind
    param: str
    data: bytes | None = attrs.field(default=None, repr=lambda d: "None" if d is None else f"<{len(d)} bytes>")
    url: str | None = None
    mime: str | None = None
    frames: tuple["MediaSource", ...] = ()

    @property
    def digest(self) -> str:
        """sha256 of what identifies the media (bytes, URL or frames): the same media reads the same."""
        h = hashlib.sha256(self.kind.encode())
        if self.data is not None:
            h.update(self.data)
        h.update((self.url or "").encode())
        for frame in self.frames:
            h.update(frame.digest.encode())
        return h.hexdigest()


def from_url(kind: Kind, url: object, param: str) -> MediaSource:
    """A part's URL: a `data:` URL (its bytes decoded here) or an http(s) URL (kept, fetched later)."""
    if not isinstance(url, str) or not url:
        raise MediaError(f"the {kind}'s url must be a non-empty string", code="invalid_media_url", param=param,
                         hint=f'send a data URL, e.g. "data:{_example_mime(kind)};base64,..."')
    match = _DATA_URL.match(url)
    if match:
        payload = url[match.end():]
        if not match.group("b64"):
            raise MediaError("the data URL is not base64", code="invalid_media_url", param=param,
                             hint=f'write it as "data:{_example_mime(kind)};base64,<the file in base64>"')
        return MediaSource(kind, param, data=b64decode(payload, param), mime=(match.group("mime") or "").lower()
                           or None)
    if url.startswith(("http://", "https://")):
        return MediaSource(kind, param, url=url)
    raise MediaError(f"the {kind}'s url is neither a data URL nor http(s): {url[:40]!r}", code="invalid_media_url",
                     param=param, hint=f'send the file inline: "data:{_example_mime(kind)};base64,..."')


def b64decode(payload: object, param: str) -> bytes:
    if not isinstance(payload, str):
        raise MediaError("the media data must be a base64 string", code="invalid_base64", param=param,
                         hint="encode the file's bytes in standard base64")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError("the media data is not valid base64", code="invalid_base64", param=param,
                         hint="encode the file's bytes in standard base64 (A-Z a-z 0-9 + /, padded with =), "
                         "without line breaks") from None
    if not data:
        raise MediaError("the media data is empty", code="empty_media", param=param, hint="send the file's bytes")
    return data


def _example_mime(kind: str) -> str:
    return {"image": "image/png", "audio": "audio/wav", "video": "video/mp4"}[kind]
