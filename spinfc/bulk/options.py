"""`spinfc score`'s command line: its flags (docs/bulk.md, "Flags"). spinfc/cli.py mounts them, and runs
`bulk/command.py` only when the command is `score`, so building the command line imports neither pyarrow nor the
engine."""

from __future__ import annotations

import argparse

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
