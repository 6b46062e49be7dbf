"""`models.toml`: the models a router serves, one `[models.NAME]` table each, and the router's own `[router]` table.

    [router]
    memory_gib = 12          # what resident models may take together (default: 80% of the memory available)
    load_timeout = 120       # seconds a request waits for its model to load before a 503 with Retry-After
    default = "gemma"        # the model of a request that names none (default: the only one, if there is one)

    [models.gemma]
    model = "gemma3-270m"    # what `spinfc serve` takes: an embedded name, a .gguf file, a snapshot directory
    ttl = 300                # seconds idle before it unloads (0, the default: stays until swapped out)
    token_budget = 4096      # any setting of `spinfc serve`, by its TOML key, for this model alone

A model's settings are the router's (its flags, `SPINFC_*` variables and `--config` file) with the table's keys
over them; a request's `model` is NAME, which the model's server answers with (its first served name). The keys
that belong to the listening server (host, port, tokens, shutdown timeout) are the router's alone.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import attrs

from spinfc.config import GROUPS, ConfigError, Settings, Source, check_value, options, parse_value

ROUTER_ONLY = frozenset({"host", "port", "token", "trusted_token", "shutdown_timeout", "body_timeout", "log_level",
                         "models"})
ROUTER_KEYS = {"memory_gib": (int, float), "load_timeout": (int, float), "default": (str,)}
DEFAULT_LOAD_TIMEOUT_S = 120.0


@attrs.frozen
class ModelEntry:
    name: str  # what a request's `model` says
    settings: Settings  # what its server runs with
    ttl_s: float  # idle seconds before it unloads; 0: never by time


@attrs.frozen
class RouterConfig:
    models: dict[str, ModelEntry]
    memory_bytes: int  # what resident models may take together
    load_timeout_s: float
    default: str | None  # the model of a request without `model`
    path: Path | None = None


def read_models(path: Path, base: Settings) -> RouterConfig:
    """The router config of the TOML file at `path`, each model's settings `base` with its table's keys over it.
    Raises `ConfigError` naming the file, the table and the key for anything it cannot use."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"models file {path} does not exist: fix --models / SPINFC_MODELS or create it") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"models file {path} cannot be read ({error}): check the file") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"models file {path} is not valid TOML: {error}") from None
    for key in table:
        if key not in ("router", "models"):
            raise ConfigError(f"{path}: unknown table [{key}]: a models file has [router] and [models.NAME] tables")
    router = _router_table(table.get("router", {}), path)
    models = table.get("models")
    if not isinstance(models, dict) or not models:
        raise ConfigError(f"{path}: no [models.NAME] table: add one per model, e.g. [models.gemma] with "
                          'model = "gemma3-270m"')
    entries = {name: _entry(name, values, base, path) for name, values in models.items()}
    default = router.get("default")
    if default is None and len(entries) == 1:
        default = next(iter(entries))
    if default is not None and default not in entries:
        raise ConfigError(f"{path}: [router] default = {default!r} is not one of the models ({', '.join(entries)})")
    memory = router.get("memory_gib")
    memory_bytes = int(memory * 2**30) if memory is not None else default_memory_bytes(entries)
    return RouterConfig(entries, memory_bytes, float(router.get("load_timeout", DEFAULT_LOAD_TIMEOUT_S)), default,
                        path)


def _router_table(values, path: Path) -> dict:
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: router must be a table: write [router] with keys {', '.join(ROUTER_KEYS)}")
    for key, value in values.items():
        kinds = ROUTER_KEYS.get(key)
        if kinds is None:
            raise ConfigError(f"{path}: unknown key {key!r} in [router]: its keys are {', '.join(ROUTER_KEYS)}")
        if not isinstance(value, kinds) or isinstance(value, bool) or (kinds != (str,) and value <= 0):
            want = "a string" if kinds == (str,) else "a positive number"
            raise ConfigError(f"{path}: [router] {key} must be {want}, got {value!r}")
    return values


def _entry(name: str, values, base: Settings, path: Path) -> ModelEntry:
    where = f"[models.{name}]"
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: models.{name} must be a table: write {where} with model = \"...\"")
    if "model" not in values:
        raise ConfigError(f"{path}: {where} has no `model` key: say what to serve (an embedded name, a .gguf file "
                          "or a snapshot directory)")
    ttl = values.get("ttl", 0)
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or ttl < 0:
        raise ConfigError(f"{path}: {where} ttl must be a number of seconds >= 0 (0: never unloads by time), "
                          f"got {ttl!r}")
    fields = {f.name: (group, f) for group, f in options()}
    groups = {group: attrs.asdict(getattr(base, group), recurse=False) for group in GROUPS}
    for key, raw in values.items():
        if key == "ttl":
            continue
        if key in ROUTER_ONLY:
            raise ConfigError(f"{path}: {where} {key}: this setting is the router's (one listening server), not a "
                              "model's: give it as a flag, variable or [server] key of the router")
        if key not in fields:
            known = ", ".join(sorted(k for k in fields if k not in ROUTER_ONLY))
            raise ConfigError(f"{path}: unknown key {key!r} in {where}: a model's keys are ttl and {known}")
        group, f = fields[key]
        source = Source("toml", f"{where} {key} in {path}")
        value = parse_value(f, raw, source)
        if key == "model" and not Path(str(value)).is_absolute() and (path.parent / str(value)).exists():
            value = str(path.parent / str(value))  # a relative snapshot or file is relative to the models file
        check_value(f, value, source)
        groups[group][key] = value
    groups["engine"]["served_model_name"] = (name, *(n for n in groups["engine"]["served_model_name"] if n != name))
    settings = Settings(**{group: GROUPS[group](**values) for group, values in groups.items()},
                        config_file=base.config_file)
    return ModelEntry(name, settings, float(ttl))


def default_memory_bytes(entries: dict[str, ModelEntry]) -> int:
    """80% of what the device of the first model has free now: the GPU's memory on CUDA, else MemAvailable."""
    device = next(iter(entries.values())).settings.engine.resolved_device()
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free * 0.8)
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * 0.8)
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.5)
