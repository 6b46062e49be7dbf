"""Request limits: each a flag, a `SPINFC_MAX_*` variable and a `[limits]` key, with the hosted service's defaults.

Each limit, when a request goes over it, is a 400 whose code names it: `<limit>_exceeded`, e.g.
`max_content_tokens_exceeded`. A trusted caller may send its own `limits` for one call (`with_overrides`).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from spinfc.config.values import setting
from spinfc.errors import RequestError


def limit_field(default: int, what: str):
    """A limit: a positive integer; `what` says what is counted, for --help and for the 400's message."""
    return setting(default, f"most {what}", "int", minimum=1)


@attrs.frozen
class Limits:
    max_content_tokens: int = limit_field(4096, "tokens in one input's content")
    max_query_tokens: int = limit_field(256, "tokens in one filled query template")
    max_prompts_per_input: int = limit_field(10_000, "questions asked of one input, placeholder combinations "
                                             "counted one by one")
    max_extractions_per_input: int = limit_field(10, "extraction slots (<*> <n> <$> <gen>) asked of one input")
    max_beam_width: int = limit_field(16, "answers searched at once for one <*> <n> <$> slot (its beam_width)")
    max_slot_tokens: int = limit_field(256, "tokens decoded for one extraction slot (its max_tokens)")
    max_processed_tokens: int = limit_field(2_000_000, "tokens processed for one request (contents, questions "
                                            "and options, after prefixes are shared)")
    max_decode_tokens: int = limit_field(65_536, "tokens decoded for one request: beam_width x max_tokens of every "
                                         "extraction slot of every input, prompts x max_tokens of a completion")
    max_body_bytes: int = limit_field(2_000_000, "bytes in one request body")
    max_options: int = limit_field(1000, "options of one query")
    max_option_tokens: int = limit_field(5, "tokens in one option")
    max_frames: int = limit_field(1024, "frames of one video")
    max_audio_seconds: int = limit_field(600, "seconds of one audio clip")
    max_image_pixels: int = limit_field(50_000_000, "pixels of one image (or video frame)")
    max_fetch_bytes: int = limit_field(20_000_000, "bytes of one media file fetched from a URL")

    def check(self, name: str, value: int, param: str | None = None) -> None:
        """Raise `LimitExceeded` (a 400 with code `<name>_exceeded`) when `value` is over the limit `name`.
        `param` is the JSON path of what was counted (`inputs[3].messages`), for the error body."""
        limit = getattr(self, name)  # an unknown name is a programming error: AttributeError
        if value > limit:
            raise LimitExceeded(name, value, limit, param)

    def as_dict(self) -> dict[str, int]:
        """The effective limits, for /v1/models and logs."""
        return attrs.asdict(self)

    def with_overrides(self, values: Mapping, param: str = "limits") -> Limits:
        """These limits with a trusted caller's per-call `limits` object applied. Raises `RequestError` (400,
        code `invalid_limits`, param `limits.<key>`) for an unknown key or a value that is not a positive
        integer."""
        if not isinstance(values, Mapping):
            raise RequestError(f"{param} must be an object of limit names to integers", code="invalid_limits",
                               param=param, hint=f"send e.g. {{\"max_options\": 2000}}; the limits are "
                               + ", ".join(LIMIT_NAMES))
        changes = {}
        for key, value in values.items():
            if key not in LIMIT_NAMES:
                raise RequestError(f"unknown limit {key!r}", code="invalid_limits", param=f"{param}.{key}",
                                   hint="the limits are " + ", ".join(LIMIT_NAMES))
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RequestError(f"{param}.{key} must be a positive integer, got {value!r}",
                                   code="invalid_limits", param=f"{param}.{key}", hint=f"send e.g. {getattr(self, key)}")
            changes[key] = value
        return attrs.evolve(self, **changes)


LIMIT_NAMES = tuple(f.name for f in attrs.fields(Limits))
ERROR_CODES = {name: f"{name}_exceeded" for name in LIMIT_NAMES}


class LimitExceeded(RequestError):
    """A request over one of the server's limits: HTTP 400, `code` = `<limit>_exceeded`, `param` = where."""

    status = 400

    def __init__(self, name: str, value: int, limit: int, param: str | None = None, *,
                 estimate: str | None = None) -> None:
        """`estimate`: `value` is a lower bound found before counting (runtime/admit/prechecks.py), and this says how."""
        what = attrs.fields_dict(Limits)[name].metadata["help"].removeprefix("most ")
        flag = "--" + name.replace("_", "-")
        where = f"{param}: " if param else ""
        counted = f"at least {value:,} {what} ({estimate})" if estimate else f"{value:,} {what}"
        super().__init__(
            f"{where}{counted}, over the server's limit of {limit:,} ({name})",
            code=ERROR_CODES[name], param=param,
            hint=f"make the request smaller (split it into several), or start the server with a higher {flag} "
            f"(SPINFC_{name.upper()}, [limits] {name})",
        )
        self.limit_name = name
        self.value = value
        self.limit = limit
