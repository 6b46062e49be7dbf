"""`MediaError`: media a request sent that cannot be read, as a 4xx naming the part and what to do."""

from __future__ import annotations

from spinfc.errors import RequestError


class MediaError(RequestError):
    """Media refused: `status` is 400 (unreadable, malformed, a kind the model does not read), 413 (over a limit)
    or 415 (a type that is not the part's kind or not one spinfc decodes); `param` the part's JSON path."""

    def __init__(self, message: str, *, code: str, hint: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message, code=code, hint=hint, param=param)
        self.status = status
