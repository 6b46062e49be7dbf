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
"""

from __future__ import annotations

import argparse
import sys

from spinfc.compiler import ALIASES, STAGES, compile_stage, launch_shapes, load_source, lower_program
from spinfc.errors import BadModelFiles, CompileError
from spinfc.ir.nodes import Program
from spinfc.ir.printer import print_ir
from spinfc.passes import PassContext
from spinfc.shapes import Shapes, ShapeError
from spinfc.registry import DEFAULT_MODEL, ModelNotFound, load_tokenizer

try:  # the server's own flags; the compiler must keep working where the server part cannot be imported
    from spinfc.server import cli as server_cli
except ImportError as error:  # noqa: F841  (kept for the message)
    server_cli, _server_import_error = None, error


SERVE_EXTRA = ("torch", "transformers", "tokenizers", "gguf", "safetensors", "litestar", "uvicorn", "prometheus_client")


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

    from spinfc.cli_quant import add_parity, add_quantize

    add_quantize(commands)
    add_parity(commands)

    serve = commands.add_parser("serve", help="serve /v1/score for one model")
    if server_cli is not None:
        server_cli.configure_parser(serve)
    serve.set_defaults(run=_serve)

    score = commands.add_parser("score", help="score every row of a Parquet, CSV or JSONL file (docs/bulk.md)")
    from spinfc.bulk import command as score_command

    score_command.configure_parser(score)
    score.set_defaults(run=score_command.main)

    calibrate = commands.add_parser("calibrate", help="choose a pack's thresholds on a labelled file "
                                    "(docs/calibration.md)")
    from spinfc.calibrate import command as calibrate_command

    calibrate_command.configure_parser(calibrate)
    calibrate.set_defaults(run=calibrate_command.main)
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
    from spinfc.config import EngineSettings

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
    from spinfc.frontend import validate_packs

    errors = validate_packs(args.directory)
    for error in errors:
        print(str(error), file=sys.stderr)
    if errors:
        print(f"{len(errors)} error(s) in {args.directory}", file=sys.stderr)
        return 2
    from pathlib import Path

    from spinfc.frontend.pack_files import pack_files

    count = len(pack_files(Path(args.directory))[0])
    print(f"{args.directory}: {count} pack{'s' if count != 1 else ''}, all valid")
    return 0


def _list_packs(args: argparse.Namespace) -> int:
    from spinfc.packsrc import PackSourceError, list_packs

    try:
        sys.stdout.write(list_packs(args.packs, args.model, official=not args.no_official_packs,
                                    allow_namespaces=args.packs_allow_namespace))
    except PackSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _serve(args: argparse.Namespace) -> int:
    if server_cli is None:
        print(f"error: spinfc serve is not available: {_server_import_error}", file=sys.stderr)
        return 2
    try:
        return server_cli.main(args)
    except ModuleNotFoundError as error:  # the core install: the server's packages are the `serve` extra
        if (error.name or "").split(".")[0] not in SERVE_EXTRA:
            raise
        print(f"error: spinfc serve needs {error.name}, which is not installed: pip install \"spinfc[serve]\"",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
