"""http(s) media URLs: fetched only from hosts on the allow-list (--media-fetch-hosts; none by default), at most
`max_fetch_bytes`, within `fetch_timeout` seconds. A URL is refused before any connection otherwise; a redirect is
followed only to a host on the allow-list too (an allowed host cannot hand the fetch to one that is not)."""

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
    _check_host(source.url, policy, source.param)
    request = urllib.request.Request(source.url, headers={"User-Agent": "spinfc"})
    opener = urllib.request.build_opener(_AllowedRedirects(policy, source.param))
    try:
        with opener.open(request, timeout=policy.fetch_timeout) as response:  # noqa: S310 (allow-listed)
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


def _check_host(url: str, policy: MediaPolicy, param: str, redirected: bool = False) -> None:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host not in policy.fetch_hosts:
        what = f"the URL redirects to host {host!r}, whose media are" if redirected else \
            f"media URLs of host {host!r} are"
        raise MediaError(f"{what} not fetched by this server", code="media_url_refused", status=400, param=param,
                         hint="send the file inline as a data URL (data:image/png;base64,...), or ask the operator "
                         "to allow the host (--media-fetch-hosts)")


class _AllowedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to an allowed host (urllib's own handler follows any)."""

    def __init__(self, policy: MediaPolicy, param: str) -> None:
        self.policy, self.param = policy, param

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        _check_host(newurl, self.policy, self.param, redirected=True)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _too_big(size: int, policy: MediaPolicy, where: str) -> MediaError:
    return MediaError(f"the file at the URL has {size:,} bytes or more, over the server's {policy.max_fetch_bytes:,}",
                      code="max_fetch_bytes_exceeded", status=413, param=where,
                      hint="send a smaller file, or start the server with a higher --max-fetch-bytes")
