"""A request the engine will not run: raised at admission (its limits, its extraction budget), answered 4xx."""

from __future__ import annotations


class Refused(Exception):
    """A request the engine will not run, with an error code, a message saying what to do, and the field at fault."""

    def __init__(self, code: str, message: str, param: str | None = None):
        super().__init__(message)
        self.code, self.message, self.param = code, message, param
