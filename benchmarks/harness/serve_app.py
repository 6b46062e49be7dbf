"""`spinfc serve`, with the model made in the server's process by a study's loader instead of read from files:

    python -m benchmarks.harness.serve_app MODULE:FUNCTION '{"kwargs": ...}' MODEL [spinfc serve flags...]

`FUNCTION(**kwargs)` returns a `load_model(name, precision, device)` (what `create_app` takes): a random-weight stack
too large to write as a snapshot (a 31B shape's 60 layers), or one of a scheme built in memory. Everything else is
`spinfc serve`'s: its flags and settings, `create_app`, uvicorn as its command configures it. Started through
`serving.Server(..., loader=...)`, never by hand."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from spinfc.config import add_arguments, load_settings
    from spinfc.server.app import create_app
    from spinfc.server.cli import uvicorn_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loader", help="MODULE:FUNCTION returning a load_model(name, precision, device)")
    parser.add_argument("kwargs", type=json.loads, help="FUNCTION's keyword arguments, as a JSON object")
    add_arguments(parser)
    args = parser.parse_args(argv)
    module, function = args.loader.split(":")
    load_model = getattr(importlib.import_module(module), function)(**args.kwargs)
    settings = load_settings(args)
    logging.basicConfig(level=settings.server.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    uvicorn.Server(uvicorn_config(create_app(settings, load_model=load_model), settings.server)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
