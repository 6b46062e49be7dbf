"""`spinfc serve [MODEL]`: the command line of the server. `spinfc/cli.py` mounts it as the `serve` subcommand.

Every flag comes from the settings table in `spinfc.config` (flags over SPINFC_* variables over a TOML file)."""

from __future__ import annotations

import argparse
import sys

from spinfc.config import ConfigError, add_arguments, load_settings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add MODEL, --config and one flag per setting to `parser`; every flag's help states its default."""
    add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Start uvicorn on the app the settings describe; 2 for settings that cannot be used, else 0 once it stops."""
    import uvicorn

    from spinfc.server.app import create_app

    try:
        settings = load_settings(args)
    except ConfigError as error:
        print(f"spinfc serve: {error}", file=sys.stderr)
        return 2
    server = settings.server
    uvicorn.run(create_app(settings), host=server.host, port=server.port, log_level=server.log_level)
    return 0


if __name__ == "__main__":  # python -m spinfc.server.cli
    parser = argparse.ArgumentParser(prog="spinfc serve", description="Serve /v1/score for one model.")
    configure_parser(parser)
    raise SystemExit(main(parser.parse_args()))
