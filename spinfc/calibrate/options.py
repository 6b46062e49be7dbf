"""`spinfc calibrate`'s command line: its flags (docs/calibration.md). spinfc/cli.py mounts them, and runs
`calibrate/command.py` only when the command is `calibrate`, so building the command line imports neither pyarrow
nor the engine."""

from __future__ import annotations

import argparse

from spinfc.registry import DEFAULT_MODEL


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="a labelled Parquet, CSV or JSONL file: a text column, an id "
                        "column, and a label column (1/0) per category or question to calibrate")
    parser.add_argument("--pack", metavar="ID_OR_FILE", help="the pack to calibrate: a bundled id or a .toml file")
    parser.add_argument("--queries", metavar="FILE", help="questions to calibrate instead of a pack (JSON, as for "
                        "spinfc score); the thresholds are written to REPORT/calibration.toml")
    parser.add_argument("--labels", metavar="COLUMNS", help="comma-separated label columns (default: every column "
                        "named after a category or a question)")
    parser.add_argument("--target", default="f1", metavar="TARGET",
                        help='how each threshold is chosen: "f1" (best F1, the default), "precision=0.9" or "recall=0.8"')
    parser.add_argument("--correct", choices=("none", "floor"), default="none",
                        help="floor: divide each question's option probabilities by its content-free ones (floor_p) "
                        "and renormalise before choosing (Calibrate Before Use); categories keep their baseline")
    parser.add_argument("-o", "--output", metavar="PACK.toml", help="the calibrated pack (default: REPORT/<pack>.toml)")
    parser.add_argument("--report", metavar="DIR", help="the report folder (default: calibration-<pack name>)")
    parser.add_argument("--resume", action="store_true", help="continue the scoring REPORT/scores/ holds")
    parser.add_argument("--text-column", default="text", metavar="NAME")
    parser.add_argument("--id-column", default="id", metavar="NAME")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the model (default: {DEFAULT_MODEL})")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--token-budget", type=int, default=None)
    parser.add_argument("--server", metavar="URL", help="score through a running `spinfc serve` at URL")
    parser.add_argument("--token", default=None, help="bearer token for --server (default: $SPINFC_TOKEN)")
    parser.add_argument("--batch-size", type=int, default=32, help="rows per engine request (default: 32)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
