"""What can go wrong in a bulk job, and how it is reported.

    BulkError   the job cannot start or go on (a missing column, an OUTPUT that holds another job's rows, a server
                that does not answer): the CLI prints it and exits with status 2; what was written stays written
    Rejected    the engine or the server refused a batch (a content over a limit, a failed pass): the runner
                scores each half again, down to single rows, so only the rows at fault become error rows
    RowError    one row that was not scored, with a code and a reason: a row of the output (its `error_code` and
                `error` columns) and a line of the --errors file
"""

from __future__ import annotations

import attrs


class BulkError(Exception):
    """A mistake that stops the job; the message says what was wrong, where, and what to do."""


class Rejected(Exception):
    """A batch the engine (or the server) would not score; `code` is the engine's or the API's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@attrs.frozen
class RowError:
    code: str  # empty_content, not_text, missing_field, malformed_line, duplicate_id, missing_id, or an engine code
    message: str
