"""User-facing compile errors: what was wrong, where, and what to do.

Every error the frontend raises is a `CompileError` (or a subclass naming the stage) with

    message  what was wrong, in one sentence
    loc      where: file (or `<request>:json.path`), 1-based line and column; None when there is no place
    hint     what to do about it (always given by the frontend)
    code     a short snake_case kind (`unknown_slot`, `duplicate_option`, ...) for programs and tests
    param    the JSON path of the offending field in a request (`scoring.queries[2].options`), else None

`str(error)` is the compiler form, ready for a terminal:

    packs/moderation.toml:14:31: error: unknown slot `<foo>`
      hint: the slots are <?> (options), <*> (text), <n> (number), <$> (amount) and <gen> (free text); ...

The server turns these into 400 responses (`as_dict`), the CLI into a non-zero exit status.
"""

from __future__ import annotations

from spinfc.ir.nodes import SourceLoc


class CompileError(Exception):
    """A mistake in a template, a pack file or a request; carries where it is and what to do."""

    def __init__(
        self,
        message: str,
        loc: SourceLoc | None = None,
        *,
        hint: str = "",
        code: str = "invalid",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = hint
        self.code = code
        self.param = param

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        text = f"{where}error: {self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, loc={self.loc!s}, message={self.message!r})"

    def as_dict(self) -> dict:
        """The error as a JSON-ready object (the shape of an OpenAI-style error body's `error`)."""
        return {
            "message": self.message,
            "hint": self.hint,
            "code": self.code,
            "param": self.param,
            "loc": None
            if self.loc is None
            else {"file": self.loc.file, "line": self.loc.line, "column": self.loc.column},
        }


class TemplateError(CompileError):
    """A template that does not parse or breaks a template rule (one slot, known slots, closed brackets)."""


class PackError(CompileError):
    """A pack file that is not valid TOML or breaks the pack format (docs/packs.md)."""


class RequestError(CompileError):
    """A /v1/score request body that breaks the request format; `param` names the field."""


class ContentTooLong(RequestError):
    """Content that, with its questions, one pass cannot hold: the one source of the code `content_too_long`
    (a 400 over HTTP, server/errors.py), raised by the pass planner, the engine's intake, the decision rounds and
    /v1/completions alike. `content`: which of the request's inputs (in request order) is at fault, where one is
    and `param` does not say."""

    CODE = "content_too_long"

    def __init__(self, message: str, *, hint: str = "", param: str | None = None, content: int | None = None) -> None:
        super().__init__(message, hint=hint, code=self.CODE, param=param)
        self.content = content


class BadModelFiles(ValueError):
    """A model's files that do not make a model (config.json not JSON or missing a key, tensors that do not match
    it, no tokenizer): the message, one line, names the file, the key or tensor, and what to do
    (runtime/weights/folder.py). `spinfc serve`, `spinfc quantize` and the router say it and nothing more."""


class CorruptWeights(BadModelFiles):
    """A weights file that is not whole (truncated, zeroed): the message names the file and says what to do
    (whole_files.py)."""
