"""`spinfc serve [MODEL]`: the command line of the server. `spinfc/cli.py` mounts it as the `serve` subcommand."""

from __future__ import annotations

import argparse

from spinfc.registry import DEFAULT_MODEL
from spinfc.server.config import CPU_TOKEN_BUDGET, CUDA_TOKEN_BUDGET, ServerConfig


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the `serve` arguments to `parser`; every flag shows its default in --help."""
    parser.add_argument(
        "model", nargs="?", default=DEFAULT_MODEL,
        help=f"model to serve: an embedded name, an alias, a .gguf file, a snapshot directory or a Hub id "
        f"(default: {DEFAULT_MODEL})",
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument(
        "--token-budget", type=_positive, default=None,
        help=f"tokens per forward pass (default: {CPU_TOKEN_BUDGET} on CPU, {CUDA_TOKEN_BUDGET} on CUDA)",
    )
    parser.add_argument(
        "--device", default=None,
        help="torch device, e.g. cpu or cuda:0 (default: cuda:0 when CUDA is available, else cpu)",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
        help="dtype of the weights and activations (default: float32)",
    )
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the warm-up pass before /readyz turns 200 (default: warm up)"
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn log level (default: info)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The `ServerConfig` the parsed arguments describe."""
    return ServerConfig(
        model=args.model, host=args.host, port=args.port, device=args.device, dtype=args.dtype,
        token_budget=args.token_budget, warmup=not args.no_warmup, log_level=args.log_level,
    )


def main(args: argparse.Namespace) -> int:
    """Start uvicorn on the app for `args`; returns the exit code once the server stops."""
    import uvicorn

    from spinfc.server.app import create_app

    config = config_from_args(args)
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level=config.log_level)
    return 0


if __name__ == "__main__":  # python -m spinfc.server.cli
    parser = argparse.ArgumentParser(prog="spinfc serve", description="Serve /v1/score for one model.")
    configure_parser(parser)
    raise SystemExit(main(parser.parse_args()))
