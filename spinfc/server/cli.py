"""`spinfc serve [MODEL]`: the command line of the server. `spinfc/cli.py` mounts it as the `serve` subcommand.

Every flag comes from the settings table in `spinfc.config` (flags over SPINFC_* variables over a TOML file)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import uvicorn

from spinfc.config import ConfigError, add_arguments, load_settings
from spinfc.packsrc import PackSourceError
from spinfc.router import create_router_app, read_models
from spinfc.runtime.schedule.allocator import limit_arenas
from spinfc.server.app import create_app
from spinfc.server.framing import framed_protocol
from spinfc.server.logs import log_config
from spinfc.server.shutdown import GracefulServer


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add MODEL, --config and one flag per setting to `parser`; every flag's help states its default."""
    add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Start uvicorn on the app the settings describe; 2 for settings or a pack source that cannot be used, and
    for a model that cannot be loaded (the server stops then, saying why in one line: a supervisor restarts it or
    an operator fixes it, rather than a server up at 503 model_failed), else 0 once it stops."""
    limit_arenas()  # before the server's threads start: they share its arenas (runtime/schedule/allocator.py)
    try:
        settings = load_settings(args)
        logging.basicConfig(level=settings.server.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
        if settings.server.models is not None:
            return _serve_router(settings)
        app = create_app(settings)  # reads the pack sources: one that cannot be read refuses the start
    except (ConfigError, PackSourceError) as error:
        print(f"spinfc serve: {error}", file=sys.stderr)
        return 2
    service = app.state.service
    running = GracefulServer(uvicorn_config(app, settings.server), service.shutdown)
    service.on_failed = lambda: setattr(running, "should_exit", True)  # called on the event loop
    try:  # the first SIGTERM/SIGINT gives the work in flight --shutdown-timeout seconds; a second exits now
        running.run()
    except KeyboardInterrupt:  # uvicorn raises the SIGINT it caught again once it has stopped
        return 130
    if service.status == "failed":
        print(f"spinfc serve: {service.error}", file=sys.stderr)
        return 2
    return 0


def uvicorn_config(app, server, **options):
    """The uvicorn config `spinfc serve` and the router run `app` under (`server`: the ServerSettings; `options`:
    more of uvicorn.Config's arguments): no query string values (a token sent there) in the access log, and HTTP
    framing as server/framing.py answers it."""
    return uvicorn.Config(app, host=server.host, port=server.port, log_level=server.log_level,
                          log_config=log_config(), http=framed_protocol(server.body_timeout), **options)


def _serve_router(settings) -> int:
    """`--models FILE`: the router in front of every model the file names (none loaded until asked for)."""
    config = read_models(Path(settings.server.models), settings)
    app = create_router_app(settings, config)
    server = settings.server
    logging.getLogger("spinfc.router").info("routing %s (memory budget %.1f GiB)", ", ".join(config.models),
                                            config.memory_bytes / 2**30)
    uvicorn.Server(uvicorn_config(app, server, timeout_graceful_shutdown=server.shutdown_timeout)).run()
    return 0


if __name__ == "__main__":  # python -m spinfc.server.cli
    parser = argparse.ArgumentParser(prog="spinfc serve", description="Serve /v1/score for one model.")
    configure_parser(parser)
    raise SystemExit(main(parser.parse_args()))
