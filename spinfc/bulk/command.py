"""`spinfc score INPUT -o OUTPUT`: the command line of the bulk job (spinfc/cli.py mounts it). docs/bulk.md.

Exit status: 0 when every row was written (error rows included: see the summary and --errors), 2 for a mistake
found before any work (a missing column, a bad query or pack, an OUTPUT of another job) or a failure that stops
the job (a server that stops answering): what was written stays, and --resume continues.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from spinfc.bulk.errors import BulkError
from spinfc.config import Limits
from spinfc.registry import DEFAULT_MODEL


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="a Parquet file or folder, a CSV file or a JSONL file")
    parser.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                        help="a Parquet dataset folder (part files), or a .jsonl file")
    parser.add_argument("--pack", action="append", default=[], metavar="ID_OR_FILE",
                        help="a bundled pack id (spinfc/support-triage) or a pack .toml file (repeatable)")
    parser.add_argument("--queries", metavar="FILE", help="a JSON file with the scoring.queries of a /v1/score request")
    parser.add_argument("--text-column", default="text", metavar="NAME", help="the column to score (default: text)")
    parser.add_argument("--id-column", default="id", metavar="NAME", help="the column of unique ids (default: id)")
    media = parser.add_argument_group("media columns (docs/bulk.md, \"Media columns\")")
    for kind in ("image", "audio", "video"):
        media.add_argument(f"--{kind}-column", metavar="NAME", help=f"a column of {kind} file paths or http(s) URLs, "
                           "read after the text" + (" (or lists of frames)" if kind == "video" else ""))
    media.add_argument("--media-root", action="append", default=[], metavar="DIR",
                       help="a folder media paths may point into, repeatable (default: the INPUT's folder)")
    media.add_argument("--media-fetch-hosts", action="append", default=[], metavar="HOST",
                       help="a host whose http(s) media URLs are fetched, repeatable (default: none, URLs refused)")
    defaults = Limits()
    for name, what in (("max_image_pixels", "pixels of one image"), ("max_frames", "frames of one video"),
                       ("max_audio_seconds", "seconds of one clip"),
                       ("max_fetch_bytes", "bytes of one media file, read or fetched")):
        media.add_argument("--" + name.replace("_", "-"), type=_positive, default=getattr(defaults, name),
                           help=f"{what}, as `spinfc serve` (default: {getattr(defaults, name):,})")
    parser.add_argument("--errors", metavar="FILE",
                        help="write one JSON line per row not scored (row, id, code, reason)")
    parser.add_argument("--resume", action="store_true", help="skip the rows whose id OUTPUT already holds")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the model (default: {DEFAULT_MODEL}); with --server, "
                        "the model the questions are checked against")
    parser.add_argument("--device", default=None, help="torch device (default: cuda:0 when available, else cpu)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="as `spinfc serve --dtype` (default: float32 on the CPU, float16 on CUDA)")
    parser.add_argument("--token-budget", type=_positive, default=None,
                        help="tokens per forward pass (default: 16,384 on CUDA, 2,048 on the CPU)")
    parser.add_argument("--server", metavar="URL", help="send the work to a running `spinfc serve` at URL")
    parser.add_argument("--token", default=None, help="bearer token for --server (default: $SPINFC_TOKEN)")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run on Ray Data: a local Ray (or the cluster RAY_ADDRESS names), or the cluster at "
                        "ADDRESS (auto, ray://head:10001)")
    parser.add_argument("--actors", type=_positive, default=None,
                        help="engine actors under --ray (default: one per GPU, else 1)")
    parser.add_argument("--batch-size", type=_positive, default=32, help="rows per engine request (default: 32)")
    parser.add_argument("--group-seconds", type=float, default=5.0, metavar="SECONDS",
                        help="a written group (a part file) holds about this many seconds of work, so a kill loses "
                        "at most that (default: 5)")
    parser.add_argument("--group-size", type=_positive, default=None,
                        help="rows per written group instead of --group-seconds (default: unset, sized by time)")
    parser.add_argument("--in-flight", type=_positive, default=4,
                        help="engine requests in flight at once (default: 4)")
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary")
    parser.add_argument("--progress-interval", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between progress lines when stderr is not a terminal (default: 10)")


def main(args: argparse.Namespace) -> int:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("spinfc score: error: pyarrow is not installed: pip install 'spinfc[bulk]' (pyarrow, and ray[data] "
              "for --ray)", file=sys.stderr)
        return 2
    try:
        if args.ray is not None:
            from spinfc.bulk.ray_job import run_ray

            run_ray(args)
        else:
            asyncio.run(_run(args))
    except BulkError as error:
        print(f"spinfc score: error: {error}", file=sys.stderr)
        return 2
    return 0


async def _run(args: argparse.Namespace, make=None):
    """The job of `args`; `make(args, questions)` builds the transport (default: `make_transport`)."""
    from spinfc.bulk import runner
    from spinfc.bulk.columns import Layout
    from spinfc.bulk.media import media_columns
    from spinfc.bulk.progress import Progress
    from spinfc.bulk.questions import load_questions
    from spinfc.bulk.readers import open_input
    from spinfc.bulk.writers import ErrorLog, check_output, metadata, open_output

    media = media_columns(args)
    source = open_input(args.input, args.text_column, args.id_column, media.flags)  # a missing column stops here
    check_output(args.output, args.resume)
    questions = load_questions(args.pack, args.queries, args.model)
    layout = Layout(questions)
    transport = (make or make_transport)(args, questions)
    await transport.start()
    from spinfc.packsrc.calibrated import stale_calibrations

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
    import os

    if args.server:
        from spinfc.bulk.http_transport import HttpTransport

        return HttpTransport(questions, args.server, token=args.token or os.environ.get("SPINFC_TOKEN"))
    from spinfc.bulk.engine_transport import EngineTransport
    from spinfc.bulk.media import media_columns

    return EngineTransport(questions, device=args.device, dtype=args.dtype, token_budget=args.token_budget,
                           media_policy=media_columns(args).policy)
