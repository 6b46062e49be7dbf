"""http(s) media URLs: fetched only from hosts on the allow-list (--media-fetch-hosts; none by default), at most
`max_fetch_bytes`, within `fetch_timeout` seconds. A URL is refused before any connection otherwise."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import attrs

from spinfc.media.errors import MediaError
from spinfc.media.parts import MediaSource
from spinfc.media.policy import MediaPolicy


def fetched(source: MediaSource, policy: MediaPolicy) -> MediaSource:
    """`source` with its URL's bytes (unchanged when it already has bytes)."""
    if source.url is None:
        return source
    host = (urllib.parse.urlsplit(source.url).hostname or "").lower()
    if host not in policy.fetch_hosts:
        raise MediaError(f"media URLs of host {host!r} are not fetched by this server", code="media_url_refused",
                         status=400, param=source.param,
                         hint="send the file inline as a data URL (data:image/png;base64,...), or ask the operator "
                         "to allow the host (--media-fetch-hosts)")
    request = urllib.request.Request(source.url, headers={"User-Agent": "spinfc"})
    try:
        with urllib.request.urlopen(request, timeout=policy.fetch_timeout) as response:  # noqa: S310 (allow-listed)
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > policy.max_fetch_bytes:
                raise _too_big(int(length), policy, source.param)
            data = response.read(policy.max_fetch_bytes + 1)
            mime = (response.headers.get_content_type() or "").lower()
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise MediaError(f"fetching {source.url} failed ({error})", code="media_fetch_failed", status=400,
                         param=source.param, hint="check the URL, or send the file inline as a data URL") from None
    if len(data) > policy.max_fetch_bytes:
        raise _too_big(len(data), policy, source.param)
    declared = mime if mime.split("/")[0] in ("image", "audio", "video") else None
    return attrs.evolve(source, data=data, mime=source.mime or declared)


def _too_big(size: int, policy: MediaPolicy, where: str) -> MediaError:
    return MediaError(f"the file at the URL has {size:,} bytes or more, over the server's {policy.max_fetch_bytes:,}",
                      code="max_fetch_bytes_exceeded", status=413, param=where,
                      hint="send a smaller file, or start the server with a higher --max-fetch-bytes")
