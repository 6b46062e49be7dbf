"""`spinfc`: compile a pack or a request and print any stage, validate packs, serve.

    spinfc compile PACK_OR_REQUEST [--model M] [--device D] [--token-budget N] [--block N] [--pass-sizes N]
                   [--content TEXT ...]
                   --emit STAGE
    spinfc packs validate DIR
    spinfc packs list [--packs SOURCE ...] [--model M]
    spinfc quantize MODEL --scheme fp8-static|int8-static|fp8-dynamic|w4a16|w4a16-asym --calibration FILE -o DIR
    spinfc parity --fixture F --reference R [--record] [--tolerance X] [--model M]
    spinfc serve [MODEL] ...        (spinfc.server.cli)
    spinfc score INPUT -o OUTPUT --pack ID_OR_FILE ...   (spinfc.bulk.command; docs/bulk.md)
    spinfc calibrate LABELLED --pack ID_OR_FILE [--target f1|precision=P|recall=R]   (docs/calibration.md)

Mistakes in the input print as `file:line:col: error: ...` with a hint and exit with status 2; so does
`packs validate` when it finds any (after printing every one).

This is the command's start-up path: it builds every command's flags from modules that need only the core install
(`spinfc.config`, bulk/options.py, calibrate/options.py, cli_quant.py), and imports a command's own modules (the
engine, the server, pyarrow) inside the function that runs it, so `spinfc compile` and `spinfc packs` start without
torch, and a command whose extra is missing says what to install.
"""

from __future__ import annotations

import argparse
import sys

from pathlib import Path

from spinfc import config
from spinfc.bulk import options as score_options
from spinfc.calibrate import options as calibrate_options
from spinfc.cli_quant import add_parity, add_quantize
from spinfc.compiler import ALIASES, STAGES, compile_stage, launch_shapes, load_source, lower_program
from spinfc.config import EngineSettings
from spinfc.errors import BadModelFiles, CompileError
from spinfc.frontend import validate_packs
from spinfc.frontend.pack_files import pack_files
from spinfc.ir.nodes import Program
from spinfc.ir.printer import print_ir
from spinfc.packsrc import PackSourceError, list_packs
from spinfc.passes import PassContext
from spinfc.registry import DEFAULT_MODEL, ModelNotFound, load_tokenizer
from spinfc.shapes import Shapes, ShapeError

SERVE_EXTRA = ("torch", "transformers", "tokenizers", "gguf", "safetensors", "litestar", "uvicorn", "prometheus_client")
BULK_EXTRA = ("pyarrow", "ray", "matplotlib")  # `pip install "spinfc[bulk]"`; score and calibrate need the engine too


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spinfc", description="A compiler and server for bulk scoring.")
    commands = parser.add_subparsers(dest="command", required=True)

    compile_ = commands.add_parser("compile", help="compile a pack or a /v1/score request and print a stage")
    compile_.add_argument("source", help="a pack (.toml) or a /v1/score request body (.json)")
    compile_.add_argument("--model", default=DEFAULT_MODEL, help=f"model whose tokenizer is used (default: {DEFAULT_MODEL})")
    compile_.add_argument("--device", default="cpu",
                          help="the device whose pass shapes to plan for, as `spinfc serve --device` (default: cpu)")
    compile_.add_argument("--token-budget", type=_positive, default=None,
                          help="rows per pass (default: the server's for the device: 2048 on cpu, 16384 on cuda)")
    compile_.add_argument("--block", type=_positive, default=128, help="every content starts on a multiple (default: 128)")
    compile_.add_argument("--pass-sizes", type=_positive, default=4,
                          help="on cuda, the launch sizes a pass may take, as `spinfc serve --pass-sizes` (default: 4)")
    compile_.add_argument("--content", action="append", default=[], metavar="TEXT",
                          help="a text to ask a pack's questions about (repeatable; without it only the floor)")
    compile_.add_argument("--emit", choices=[*STAGES, *ALIASES], required=True, metavar="STAGE",
                          help=f"print the program after this pass: {', '.join(STAGES)} "
                          f"(aliases: {', '.join(f'{a}={p}' for a, p in ALIASES.items())})")
    compile_.set_defaults(run=_compile)

    packs = commands.add_parser("packs", help="pack files").add_subparsers(dest="packs_command", required=True)
    validate = packs.add_parser("validate", help="check every pack file in a directory; print every error")
    validate.add_argument("directory")
    validate.set_defaults(run=_validate)
    listing = packs.add_parser("list", help="the packs a server would enable for a model, and those skipped")
    listing.add_argument("--packs", action="append", default=[], metavar="SOURCE",
                         help="a pack source: a folder, git+URL@tag#path or github:owner/repo@tag#path (repeatable)")
    listing.add_argument("--model", default=DEFAULT_MODEL, help=f"the model served (default: {DEFAULT_MODEL})")
    listing.add_argument("--no-official-packs", action="store_true", help="leave out the bundled packs")
    listing.add_argument("--packs-allow-namespace", action="append", default=[], metavar="NAMESPACE",
                         help="allow a source to define packs in a reserved namespace (e.g. spinfc)")
    listing.set_defaults(run=_list_packs)

    add_quantize(commands)
    add_parity(commands)

    serve = commands.add_parser("serve", help="serve /v1/score for one model")
    config.add_arguments(serve)  # MODEL, --config and one flag per setting (spinfc.server.cli runs them)
    serve.set_defaults(run=_serve)

    score = commands.add_parser("score", help="score every row of a Parquet, CSV or JSONL file (docs/bulk.md)")
    score_options.configure_parser(score)
    score.set_defaults(run=_score)

    calibrate = commands.add_parser("calibrate", help="choose a pack's thresholds on a labelled file "
                                    "(docs/calibration.md)")
    calibrate_options.configure_parser(calibrate)
    calibrate.set_defaults(run=_calibrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CompileError as error:
        print(str(error), file=sys.stderr)
        return 2
    except (ModelNotFound, BadModelFiles) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def compile_shapes(device: str, budget: int | None, block: int, sizes: int = 4) -> Shapes:
    """The shapes a server on `device` runs (`Shapes.for_settings`), with its default budget when none is given."""
    settings = EngineSettings(device=device, token_budget=budget or None, block=block, pass_sizes=sizes)
    try:
        return Shapes.for_settings(settings)
    except ShapeError as error:
        raise CompileError(str(error), code="bad_shapes", hint="change --token-budget or --block") from None


def _codes(model: str) -> tuple[str, ...]:
    """A decision model's codes (what tokenize reads a code question as), from its config.json alone."""
    from spinfc.runtime.models.families import codes_of_model  # the serve extra's package: torch

    return codes_of_model(model)


def _compile(args: argparse.Namespace) -> int:
    shapes = compile_shapes(args.device, args.token_budget, args.block, args.pass_sizes)
    program = load_source(args.source, args.model, contents=args.content)
    needs_tokenizer = args.emit not in ("parse", "ir", "expand-placeholders", "add-floor")
    tokenizer = load_tokenizer(program.model) if needs_tokenizer else None
    codes = _codes(program.model) if needs_tokenizer else ()
    program = compile_stage(program, args.emit, PassContext(tokenizer=tokenizer, shapes=shapes, codes=codes))
    sys.stdout.write(print_ir(program, tokenizer))
    if args.emit == "launches":
        sys.stdout.write(format_launches(program, shapes))
    return 0


def format_launches(program: Program, shapes: Shapes | None = None) -> str:
    """The fixed shapes and a summary of each pass lowered with `backend.launch.lower`."""
    sizes = launch_shapes(program, shapes)
    lines = [f"launches ({len(program.layouts)}): " + ", ".join(
        f"tokens/positions/ends [{T}], rows [{R}], read_row/read_token [{N}]" for T, R, N in sorted(set(sizes)))]
    for layout, launch, (_, R, N) in zip(program.layouts, lower_program(program, shapes), sizes):
        answer_rows, reads = len({r.row for r in layout.reads}), len(layout.reads)
        lines.append(
            f"  launch {layout.index}: tokens {tuple(launch.tokens.shape)} {launch.tokens.dtype}, positions max "
            f"{int(launch.positions.max())}, ends {launch.ends.dtype}, {len(launch.spans)} spans, rows "
            f"{tuple(launch.rows.shape)} ({answer_rows} answer rows + {R - answer_rows} padding), read_row "
            f"{tuple(launch.read_row.shape)} ({reads} reads + {N - reads} padding)"
        )
    return "\n".join(lines) + "\n"


def _validate(args: argparse.Namespace) -> int:
    errors = validate_packs(args.directory)
    for error in errors:
        print(str(error), file=sys.stderr)
    if errors:
        print(f"{len(errors)} error(s) in {args.directory}", file=sys.stderr)
        return 2
    count = len(pack_files(Path(args.directory))[0])
    print(f"{args.directory}: {count} pack{'s' if count != 1 else ''}, all valid")
    return 0


def _list_packs(args: argparse.Namespace) -> int:
    try:
        sys.stdout.write(list_packs(args.packs, args.model, official=not args.no_official_packs,
                                    allow_namespaces=args.packs_allow_namespace))
    except PackSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        from spinfc.server import cli as server_cli

        return server_cli.main(args)
    except ModuleNotFoundError as error:  # the core install: the server's packages are the `serve` extra
        return _missing("serve", error)


def _score(args: argparse.Namespace) -> int:
    try:
        from spinfc.bulk import command

        return command.main(args)
    except ModuleNotFoundError as error:
        return _missing("score", error)


def _calibrate(args: argparse.Namespace) -> int:
    try:
        from spinfc.calibrate import command

        return command.main(args)
    except ModuleNotFoundError as error:
        return _missing("calibrate", error)


def _missing(command: str, error: ModuleNotFoundError) -> int:
    """2, having said which package `spinfc COMMAND` lacks and the extra that installs it; a module missing that no
    extra installs is raised again (a bug, not an install)."""
    top = (error.name or "").split(".")[0]
    extra = "bulk" if top in BULK_EXTRA else "serve" if top in SERVE_EXTRA else None
    if extra is None:
        raise error
    print(f"error: spinfc {command} needs {error.name}, which is not installed: pip install \"spinfc[{extra}]\"",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
