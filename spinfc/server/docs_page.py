"""The schema's browser page (`/schema`, `/schema/swagger`): Swagger UI, its scripts, styles and icons served by this
server from the `swagger-ui-bundle-v2` package, so the page works with no network (Litestar's own pages load them
from CDNs, and their Google fonts). The other viewers Litestar offers (ReDoc, Stoplight Elements, RapiDoc) have no
Python package of their assets and are not served."""

from __future__ import annotations

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.static_files import create_static_files_router

ASSETS = "/schema/assets"


def _folder() -> str:
    import swagger_ui_bundle

    return swagger_ui_bundle.swagger_ui_path


def assets_router():
    """GET /schema/assets/<file>: Swagger UI's files from the package (behind --token as the schema page is)."""
    return create_static_files_router(path=ASSETS, directories=[_folder()], include_in_schema=False)


def openapi_config(title: str, version: str) -> OpenAPIConfig:
    swagger = SwaggerRenderPlugin(js_url=f"{ASSETS}/swagger-ui-bundle.js", css_url=f"{ASSETS}/swagger-ui.css",
                                  standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
                                  favicon=f'<link rel="icon" type="image/png" href="{ASSETS}/favicon-32x32.png">',
                                  path=["/", "/swagger"])
    return OpenAPIConfig(title=title, version=version, render_plugins=[swagger])
