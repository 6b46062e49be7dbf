"""The schema's browser page works offline: /schema (and /schema/swagger) is Swagger UI whose every script, style
and icon this server serves from an installed package; nothing is loaded from another host (no CDN, no web font)."""

from __future__ import annotations

import re

import pytest
from litestar.testing import TestClient

from spinfc.config import Settings
from spinfc.server.app import create_app
from .unready import no_model

LINKED = re.compile(r'(?:src|href)\s*=\s*["\']([^"\']+)["\']')
KINDS = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


@pytest.mark.parametrize("page", ["/schema", "/schema/swagger"])
def test_the_schema_page_loads_nothing_from_another_host(page) -> None:
    with TestClient(create_app(Settings(), load_model=no_model)) as client:
        html = client.get(page)
        assert html.status_code == 200 and "swagger-ui" in html.text
        assert not re.search(r"https?://", html.text.split("<script", 1)[0] + "".join(LINKED.findall(html.text))), \
            "the page links to another host"
        assets = LINKED.findall(html.text)
        assert {a.rsplit("/", 1)[-1] for a in assets} >= {"swagger-ui-bundle.js", "swagger-ui.css",
                                                          "swagger-ui-standalone-preset.js"}
        for asset in assets:
            response = client.get(asset)
            assert response.status_code == 200 and len(response.content) > 100, asset
            suffix = asset[asset.rindex("."):]
            assert KINDS[suffix] in response.headers["content-type"], (asset, response.headers["content-type"])
        assert client.get("/schema/openapi.json").status_code == 200


def test_the_viewers_that_would_need_a_cdn_are_not_served() -> None:
    with TestClient(create_app(Settings(), load_model=no_model)) as client:
        for page in ("/schema/elements", "/schema/redoc", "/schema/rapidoc"):
            assert client.get(page).status_code == 404, page
