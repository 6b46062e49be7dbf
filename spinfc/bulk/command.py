"""`spinfc score INPUT -o OUTPUT`: the bulk job of the parsed flags (bulk/options.py; spinfc/cli.py mounts them).
docs/bulk.md.

Exit status: 0 when every row was written (error rows included: see the summary and --errors), 2 for a mistake
found before any work (a missing column, a bad query or pack, an OUTPUT of another job) or a failure that stops
the job (a server that stops answering): what was written stays, and --resume continues.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from spinfc.bulk import runner
from spinfc.bulk.columns import Layout
from spinfc.bulk.errors import BulkError
from spinfc.bulk.http_transport import HttpTransport
from spinfc.bulk.media import media_columns
from spinfc.bulk.progress import Progress
from spinfc.bulk.questions import load_questions
from spinfc.bulk.readers import open_input
from spinfc.bulk.writers import ErrorLog, check_output, metadata, open_output
from spinfc.packsrc.calibrated import stale_calibrations


def main(args: argparse.Namespace) -> int:
    try:
        if args.ray is not None:
            from spinfc.bulk.ray_job import run_ray  # ray and the engine: --server needs neither

            run_ray(args)
        else:
            asyncio.run(run(args))
    except BulkError as error:
        print(f"spinfc score: error: {error}", file=sys.stderr)
        return 2
    return 0


async def run(args: argparse.Namespace, make=None):
    """The job of `args`; `make(args, questions)` builds the transport (default: `make_transport`)."""
    media = media_columns(args)
    source = open_input(args.input, args.text_column, args.id_column, media.flags)  # a missing column stops here
    check_output(args.output, args.resume)
    questions = load_questions(args.pack, args.queries, args.model)
    layout = Layout(questions)
    transport = (make or make_transport)(args, questions)
    await transport.start()
    for warning in stale_calibrations(questions.packs, transport.fingerprint):
        print(f"spinfc score: warning: {warning}", file=sys.stderr)
    try:
        output = open_output(args.output, layout.schema(metadata(transport)), args.resume)
        errors = ErrorLog(args.errors)
        total = None if source.total is None else max(0, source.total - len(output.done))
        progress = Progress(total, quiet=args.quiet, interval=args.progress_interval)
        try:
            summary = await runner.run(source, transport, layout, output, errors, progress,
                                       batch_size=args.batch_size, group_size=args.group_size,
                                       group_seconds=args.group_seconds,
                                       in_flight=args.in_flight, media=media if media.columns else None)
        finally:
            output.close()
            errors.close()
        progress.close(summary)
    finally:
        await transport.close()
    return summary


def make_transport(args: argparse.Namespace, questions):
    if args.server:
        return HttpTransport(questions, args.server, token=args.token or os.environ.get("SPINFC_TOKEN"))
    from spinfc.bulk.engine_transport import EngineTransport  # torch: --server needs none

    return EngineTransport(questions, device=args.device, dtype=args.dtype, token_budget=args.token_budget,
                           media_policy=media_columns(args).policy)
