"""`spinfc quantize` and `spinfc parity`: the command lines of quantized checkpoints and recorded references."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


# the bundled calibration set: 90 short texts of the kinds spinfc scores (docs/quantization.md), in the checkout
# beside the package (as packs/ is)
DEFAULT_CALIBRATION = Path(__file__).resolve().parent.parent / "fixtures" / "calibration.jsonl"
SCHEME_NAMES = ("fp8-static", "int8-static", "fp8-dynamic", "w4a16", "w4a16-asym")  # spinfc.runtime.quant.schemes.SCHEMES (a test checks they agree);
# named here so that building the command line needs no torch


def add_quantize(commands) -> None:
    quantize = commands.add_parser("quantize", help="calibrate a model and write a W8A8 or W4A16 (GPTQ int4) "
                                   "checkpoint (compressed-tensors format)")
    quantize.add_argument("model", help="an embedded model (smollm2-135m, gemma3-270m), a .gguf file or a "
                          "Hugging Face snapshot directory")
    quantize.add_argument("--scheme", choices=list(SCHEME_NAMES), default="fp8-static",
                          help="fp8-static (static per-tensor activation scales, calibrated), int8-static, "
                          "fp8-dynamic (per-token activation scales computed at run time: compressed-tensors' "
                          "FP8_DYNAMIC), or w4a16 (-asym): int4 weights in groups of 128 by GPTQ; default: fp8-static "
                          "(docs/quantization.md compares them)")
    quantize.add_argument("--group-size", type=int, choices=(32, 64, 128), default=None, metavar="G",
                          help="w4a16: input channels per scale, 32, 64 or 128 (default 128; every quantized layer's "
                          "input width must be a multiple of it: SmolLM2's 576 needs 64)")
    quantize.add_argument("--calibration", default=None, metavar="FILE",
                          help='JSONL, one {"text": ...} per line (default: the bundled set, '
                          'fixtures/calibration.jsonl)')
    quantize.add_argument("-o", "--output", required=True, metavar="DIR", help="the checkpoint directory to write")
    quantize.add_argument("--smoothing", type=_strength, default=0.0, metavar="A",
                          help="SmoothQuant strength in [0, 1] (llm-compressor's default is 0.5): activation outliers "
                          "moved into the weights before quantizing (default: 0, none; try it per model with "
                          "`spinfc parity`)")
    quantize.add_argument("--max-gap", type=_gap, default=None, metavar="X",
                          help="keep the layers that calibration finds most sensitive in the half dtype until the "
                          "largest log p difference to float32 on the calibration texts is at most X (e.g. 0.25; "
                          "default: every layer quantized)")
    quantize.add_argument("--device", default="cpu", metavar="DEVICE",
                          help="where the calibration forwards, the Hessians and GPTQ run: cpu or cuda:N (default: "
                          "cpu); the checkpoint is written from the host either way, and differs from the CPU's "
                          "only by the GPU's float32 rounding (docs/quantization.md, \"On a GPU\")")
    quantize.set_defaults(run=_quantize)


def _gap(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a gap budget: give a positive log p difference, e.g. 0.25")
    return value


def _strength(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a smoothing strength: give a number from 0 (no smoothing) "
                                         "to 1, e.g. 0.5")
    return value


def _quantize(args: argparse.Namespace) -> int:
    from spinfc.runtime.quant.quantize import quantize_model
    from spinfc.runtime.quant.calibrate import CalibrationError
    from spinfc.errors import BadModelFiles
    from spinfc.runtime.weights import UnsupportedModel

    from spinfc.runtime.load.device import DeviceError, usable_device
    from spinfc.runtime.quant.progress import Steps

    try:
        device = usable_device(args.device)  # before any work: a device this machine lacks is one line
    except DeviceError as error:
        print(f"spinfc quantize: {error}", file=sys.stderr)
        return 2
    calibration = Path(args.calibration) if args.calibration else DEFAULT_CALIBRATION
    if not calibration.is_file():
        print(f"spinfc quantize: the calibration file {calibration} does not exist: give --calibration FILE "
              '(JSONL, one {"text": ...} per line)', file=sys.stderr)
        return 2
    output = Path(args.output)
    if output.exists() and not output.is_dir():  # before any work: a checkpoint is a directory of files
        print(f"spinfc quantize: -o {output} is an existing file, and a checkpoint is a directory: give a new "
              "directory's path (or remove the file)", file=sys.stderr)
        return 2
    steps = Steps()
    steps.say(f"{args.model} -> {args.output} ({args.scheme}) on {device}; calibration: {calibration}")
    try:
        summary = quantize_model(args.model, args.scheme, calibration, Path(args.output),
                                 smoothing=args.smoothing, device=device, steps=steps, max_gap=args.max_gap,
                                 group_size=args.group_size)
    except (CalibrationError, BadModelFiles, UnsupportedModel, OSError, ValueError) as error:
        print(f"spinfc quantize: {error}", file=sys.stderr)
        return 2
    smoothing = summary.get("smoothing")
    smoothed = f"smoothed (strength {smoothing['alpha']:g}), " if smoothing else ""
    steps.say("done")
    kept = summary.get("kept_in_half")
    if kept:
        smoothed += (f"{len(kept['modules'])} layers kept in half precision (gap {kept['gap']:g} within "
                     f"{kept['max_gap']:g}, {kept['gap_all_quantized']:g} with every layer quantized), ")
    print(f"wrote {args.output}: {summary['scheme']}, {smoothed}calibrated on {summary['texts']} texts "
          f"({summary['tokens']} tokens), {len(summary['input_max'])} layer inputs; serve it with "
          f"`spinfc serve {args.output}`")
    return 0


def add_parity(commands) -> None:
    parity = commands.add_parser("parity", help="run a recorded job and compare it with (or record) a reference")
    parity.add_argument("--fixture", required=True, metavar="F", help="a job: fixtures/parity/*.json")
    parity.add_argument("--reference", required=True, metavar="R", help="the reference file to compare or write")
    parity.add_argument("--record", action="store_true", help="write the reference instead of comparing")
    parity.add_argument("--tolerance", type=float, default=0.0, metavar="X",
                        help="largest difference allowed in any field when fingerprints differ (default: 0)")
    parity.add_argument("--model", default=None, help="the model (default: the fixture's)")
    parity.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parity.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="default: float32 on the CPU, bfloat16 (mixed) on CUDA")
    parity.set_defaults(run=_parity)


def _parity(args: argparse.Namespace) -> int:
    from spinfc.errors import CompileError
    from spinfc.runtime.parity import ParityError, compare, read_json, run_fixture

    try:
        fixture = read_json(Path(args.fixture), "fixture")
        reference = None if args.record else read_json(Path(args.reference), "reference")
        run = run_fixture(fixture, model=args.model, device=args.device, dtype=args.dtype,
                          base=Path(args.fixture).parent)
        if args.record:
            Path(args.reference).write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
            print(f"recorded {args.reference}: {run['fingerprint']}, {len(run['results'])} option scores")
            return 0
        report = compare(run, reference, args.tolerance)
    except (OSError, ParityError, CompileError) as error:
        print(f"spinfc parity: {error}", file=sys.stderr)
        return 2
    print(report.text())
    return 0 if report.ok else 1
