"""The access log without secrets: uvicorn logs each request's path with its query string, so a token a client
sends as `?api_key=...` (the server reads tokens from the Authorization header only) would land in the log.
`RedactQuery` replaces every query value with `***` in uvicorn's access lines; `log_config()` is uvicorn's own
logging configuration with that filter on the access handler."""

from __future__ import annotations

import copy
import logging
from urllib.parse import parse_qsl, quote

from uvicorn.config import LOGGING_CONFIG


class RedactQuery(logging.Filter):
    """uvicorn.access records carry (client, method, path?query, http version, status): the query's values go."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], redact(args[2]), *args[3:])
        return True


def redact(full_path: str) -> str:
    """/v1/models?api_key=s3cret&x -> /v1/models?api_key=***&x"""
    path, _, query = full_path.partition("?")
    names = [quote(name, safe="") + ("=***" if value else "") for name, value in
             parse_qsl(query, keep_blank_values=True)]
    return f"{path}?{'&'.join(names)}" if names else path


def log_config() -> dict:
    """uvicorn's default logging configuration, with `RedactQuery` on the access log."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_query"] = {"()": RedactQuery}
    config["handlers"]["access"]["filters"] = ["redact_query"]
    return config
