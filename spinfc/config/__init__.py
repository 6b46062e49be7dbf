"""The server's settings: one frozen struct, layered flags > `SPINFC_*` variables > TOML file > defaults.

    [engine]    model, device, dtype, precision, token_budget, block, pass_sizes, served_model_name,
                content_cache_tokens, max_memory, warmup
    [server]    host, port, token, trusted_token, queue, max_queued_tokens, shutdown_timeout, body_timeout, debug,
                models, log_level, stream_count, stream_bytes, stream_ttl
    [features]  extraction, generation, packs, no_official_packs, packs_allow_namespace
    [limits]    max_content_tokens, max_query_tokens, ... (see `Limits`)

Every setting is one attrs field whose metadata holds its help text, its variables and its flag; the flags
(`add_arguments`), the layering (`load_settings`) and the reference in docs/configuration.md all come from that
one table, so a new setting is one field. A TOML file has the same keys as the flags with underscores, grouped as
above; `--config FILE` or `SPINFC_CONFIG` names it. A later layer replaces a value (lists too), never merges.
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

from spinfc.config.limits import LimitExceeded, Limits, limit_field  # noqa: F401  (re-exported)
from spinfc.config.values import ConfigError, Source, check_value, describe_default, parse_value, setting
from spinfc.registry import DEFAULT_MODEL

# SPINFC_* variables that are not settings: the config file, the caches (registry.py), the Python client's and the
# test suite's. Any other SPINFC_* variable is a mistake (a typo, or a name from another tool) and refuses the start.
OTHER_VARIABLES = {"SPINFC_CONFIG": "the TOML file", "SPINFC_CACHE": "spinfc's cache folder",
                   "SPINFC_CACHE_DIRS": "extra model folders", "SPINFC_BASE_URL": "the Python client's server",
                   "SPINFC_TEST_SEED": "the test suite's random seed"}

CPU_TOKEN_BUDGET = 2048  # one pass takes seconds on a CPU
CUDA_TOKEN_BUDGET = 16384  # the fastest budget for news-length content on a GPU


@attrs.frozen
class EngineSettings:
    model: str = setting(DEFAULT_MODEL, "model to serve: an embedded name, an alias, a .gguf file, a snapshot "
                         "directory or a Hugging Face repo id", "str", metavar="MODEL")
    model_dir: str | None = setting(None, "a local model folder to serve (a snapshot with config.json and safetensors, "
                                    "or a folder holding one .gguf file, e.g. a read-only volume); given, it is "
                                    "served instead of MODEL", "optional_str", metavar="DIR")
    device: str | None = setting(None, "torch device, e.g. cpu or cuda:0; unset: cuda:0 when CUDA is available, "
                                 "else cpu", "optional_str", metavar="DEVICE")
    dtype: str | None = setting(None, "dtype of the matmuls and the activations between them; unset: float32 on "
                                "the CPU, float16 on CUDA (an explicit float32 runs float32 on CUDA too)", "choice",
                                choices=("float32", "bfloat16", "float16"))
    precision: str = setting("mixed", "with a half-precision dtype: mixed keeps the residual stream, norms, the "
                             "answer rows and the LM head in float32; uniform runs everything in --dtype", "choice",
                             choices=("mixed", "uniform"))
    token_budget: int | None = setting(None, f"packed tokens per forward pass; unset: {CUDA_TOKEN_BUDGET} on CUDA, "
                                       f"{CPU_TOKEN_BUDGET} on the CPU", "optional_int", minimum=128)
    block: int = setting(128, "every content starts at a multiple of this many rows (on CUDA a multiple of 64, the "
                         "attention kernel's alignment); smaller wastes fewer rows per content", "int", minimum=16)
    pass_sizes: int = setting(4, "on CUDA, how many launch sizes a pass may take (the budget's k / N for k = 1..N, "
                              "each captured as a CUDA graph and checked for row invariance at start-up): a pass "
                              "launches at the smallest that holds it; 1 runs every pass at the full budget", "int",
                              minimum=1, maximum=16)
    served_model_name: tuple[str, ...] = setting([], "the name(s) the server answers with and accepts in `model`, "
                                                 "repeatable (the first is reported; unset: the model's own name)",
                                                 "list", flag="--served-model-name", metavar="NAME")
    content_cache_tokens: int | None = setting(None, "content tokens whose keys and values are kept across "
                                               "requests, so a content sent again reads only its questions (LRU); "
                                               "unset: what fits a tenth of the memory (at most 4 GiB) on the CPU, "
                                               "a quarter of the free device memory on CUDA; 0 turns it off", "optional_int", minimum=0,
                                               metavar="TOKENS")
    max_memory: int | None = setting(None, "device memory the server may hold, e.g. 24GiB (24GB, 24G or bytes): the "
                                     "content cache is sized so that the weights, the recurrent state, the K/V of a "
                                     "pass and its decode, the graphs' workspaces and the cache stay inside it, and "
                                     "the start is refused, naming each part in GiB, where even those without the "
                                     "cache do not fit (CUDA; on the CPU it sizes the cache, docs/models.md)",
                                     "optional_size", metavar="SIZE")
    warmup: str = setting("full", "what runs before /readyz turns 200: full (a pass of every launch shape), short "
                          "(one small pass) or none (first calls pay it)", "choice", choices=("full", "short", "none"))

    def resolved_device(self) -> str:
        """The device to run on: `device`, or cuda:0 when CUDA is available, else cpu."""
        if self.device:
            return self.device
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"

    def resolved_budget(self) -> int:
        """The token budget of one pass: `token_budget`, or the default for the resolved device."""
        if self.token_budget is not None:
            return self.token_budget
        return CUDA_TOKEN_BUDGET if self.resolved_device().startswith("cuda") else CPU_TOKEN_BUDGET


@attrs.frozen
class ServerSettings:
    host: str = setting("0.0.0.0", "address to listen on", "str", metavar="ADDRESS")
    port: int = setting(8000, "port to listen on", "int", minimum=1, maximum=65535)
    token: str | None = setting(None, "require `Authorization: Bearer <token>` on every route but health "
                                "(--api-key is the same setting, as in vLLM and TEI)", "optional_str",
                                env=("SPINFC_TOKEN", "SPINFC_API_KEY"), aliases=("--api-key",), metavar="TOKEN",
                                secret=True)
    trusted_token: str | None = setting(None, "token of a trusted caller (your own front end): it may send per-call "
                                        "`limits` and `features`, sees engine internals and may drain",
                                        "optional_str", env=("SPINFC_ENGINE_TOKEN", "SPINFC_TRUSTED_TOKEN"),
                                        metavar="TOKEN", secret=True)
    queue: int | None = setting(None, "a cap on requests accepted while one is running (unset: no cap; admission "
                                "is by queued work, --max-queued-tokens); beyond it 429 concurrency_limit with "
                                "Retry-After", "optional_int", minimum=0)
    max_queued_tokens: int | None = setting(None, "work admitted and not yet run, in tokens, beyond which a new "
                                            "request is 429 queue_full with Retry-After from the queued work and the "
                                            "measured rate (unset: four passes, 4 x --token-budget)",
                                            "optional_int", minimum=1, metavar="TOKENS")
    shutdown_timeout: int = setting(30, "seconds the work in flight has to finish after SIGTERM or SIGINT; then "
                                    "streams get a last shutting_down event and end (a second signal exits now)",
                                    "int", minimum=0, metavar="SECONDS")
    body_timeout: int = setting(5, "seconds a request's body may go without a byte arriving (a Content-Length "
                                "larger than what is sent); then 408 request_timeout and the connection is closed",
                                "int", minimum=1, metavar="SECONDS")
    debug: bool = setting(False, "engine internals (the plan of the request) in every response", "bool")
    models: str | None = setting(None, "a TOML file of [models.NAME] tables: serve several models from one server, "
                                 "each loaded on its first request, swapped out when memory does not hold them all "
                                 "(docs/router.md); MODEL is then not used", "optional_str", metavar="FILE")
    log_level: str = setting("info", "log level", "choice",
                             choices=("critical", "error", "warning", "info", "debug"))
    stream_count: int = setting(256, "streamed generations sent with X-Conversation-Id kept for a client that "
                                "reconnects (GET /v1/stream/{id}) or cancels; the least recently used finished one "
                                "makes room; 0 keeps none and turns the header off", "int", minimum=0, metavar="N")
    stream_bytes: int = setting(64 * 2**20, "bytes the kept streams may hold together; over it the least recently "
                                "used go, finished ones first", "int", minimum=1, metavar="BYTES")
    stream_ttl: int = setting(600, "seconds a finished kept stream stays after it was last read", "int", minimum=1,
                              metavar="SECONDS")


@attrs.frozen
class FeatureSettings:
    extraction: bool = setting(True, "the searched slots <*> <n> <$> (text, numbers and amounts extracted from the "
                               "same read)", "bool")
    generation: bool = setting(True, "free-text generation (<gen> slots and generate = true, /v1/chat/completions "
                               "without scoring)",
                               "bool")
    packs: tuple[str, ...] = setting([], "a prompt-pack source, repeatable: a local folder, git+URL@tag#path or "
                                     "github:owner/repo@tag#path", "list", flag="--packs", metavar="SOURCE")
    no_official_packs: bool = setting(False, "do not load the packs bundled with spinfc (packs/)", "bool")
    packs_allow_namespace: tuple[str, ...] = setting([], "let --packs sources define packs in a reserved namespace "
                                                     "(spinfc), e.g. for an edited copy of a bundled pack",
                                                     "list", flag="--packs-allow-namespace", metavar="NAMESPACE")
    media: tuple[str, ...] = setting(["image", "audio", "video"], "which media requests may send, of those the "
                                     "model reads: image, audio, video (comma-separated or repeated), or none",
                                     "list", flag="--media", metavar="KINDS")
    no_media: bool = setting(False, "text only, and the model's vision and audio towers are not loaded (less "
                             "memory)", "bool")
    media_fetch_hosts: tuple[str, ...] = setting([], "hosts whose http(s) media URLs are fetched, repeatable "
                                                 "(unset: media URLs are refused; send data URLs)", "list",
                                                 flag="--media-fetch-hosts", metavar="HOST")

    @property
    def towers_loaded(self) -> bool:
        return not self.no_media

    def media_kinds(self) -> tuple[str, ...]:
        """The kinds --media names (none with --no-media or --media none)."""
        kinds = tuple(k.strip() for value in self.media for k in value.split(",") if k.strip())
        if self.no_media or kinds == ("none",):
            return ()
        unknown = [k for k in kinds if k not in ("image", "audio", "video")]
        if unknown:
            raise ConfigError(f"--media {','.join(kinds)}: unknown kind {unknown[0]!r}; the kinds are image, audio, "
                              "video, or none")
        return kinds


@attrs.frozen
class Settings:
    """Everything the server reads at start-up. Frozen: a running server never changes its settings."""

    engine: EngineSettings = EngineSettings()
    server: ServerSettings = ServerSettings()
    features: FeatureSettings = FeatureSettings()
    limits: Limits = Limits()
    config_file: Path | None = None  # the TOML file the settings were read from, if any


GROUPS: dict[str, type] = {"engine": EngineSettings, "server": ServerSettings, "features": FeatureSettings,
                           "limits": Limits}


def options():
    """Every setting as (group, attrs field), in the order of the groups and their fields."""
    return [(group, f) for group, cls in GROUPS.items() for f in attrs.fields(cls)]


def env_names(key: str, f: attrs.Attribute) -> tuple[str, ...]:
    return f.metadata["env"] or (f"SPINFC_{key.upper()}",)


def flag_name(key: str, f: attrs.Attribute) -> str:
    return f.metadata["flag"] or "--" + key.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add MODEL (positional), --config and one flag per setting to `parser`. Every flag defaults to None (so a
    flag that was not given leaves the lower layers in charge); its help states the real default and variable."""
    parser.add_argument("model", nargs="?", default=None, metavar="MODEL",
                        help=f"{attrs.fields(EngineSettings).model.metadata['help']} (default: {DEFAULT_MODEL}; "
                        "SPINFC_MODEL; [engine] model)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a TOML file with [engine] [server] [features] [limits] tables (default: none; "
                        "SPINFC_CONFIG)")
    for group, f in options():
        if f.name == "model":
            continue
        meta = f.metadata
        env = env_names(f.name, f)[0]
        help_text = f"{meta['help']} (default: {describe_default(f)}; {env}; [{group}] {f.name})"
        help_text = help_text.replace("%", "%%")
        flags = (flag_name(f.name, f), *meta["aliases"])
        if meta["kind"] == "bool" and f.default is False:
            parser.add_argument(*flags, dest=f.name, action="store_const", const=True, default=None, help=help_text)
        elif meta["kind"] == "bool":
            parser.add_argument(*flags, dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text)
        elif meta["kind"] == "list":
            parser.add_argument(*flags, dest=f.name, action="append", default=None, metavar=meta["metavar"],
                                help=help_text)
        elif meta["kind"] == "choice":
            parser.add_argument(*flags, dest=f.name, choices=meta["rules"]["choices"], default=None, help=help_text)
        else:
            parser.add_argument(*flags, dest=f.name, type=int if "int" in meta["kind"] else str, default=None,
                                metavar=meta["metavar"] or ("N" if "int" in meta["kind"] else "TEXT"), help=help_text)
    parser.add_argument("--no-warmup", dest="warmup", action="store_const", const="none", default=None,
                        help="the same as --warmup none")


def load_settings(args: argparse.Namespace | None = None, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings that `args` (from a parser given `add_arguments`), `environ` and the TOML file they name
    describe, each layer over the one below. Raises `ConfigError` naming the key, where it came from and what to
    write instead, for a wrong type, a value out of range, an unknown key or an unreadable file."""
    args = args if args is not None else argparse.Namespace()
    config_path = getattr(args, "config", None) or environ.get("SPINFC_CONFIG") or None
    table = _read_toml(Path(config_path)) if config_path else {}
    base = Path(config_path).parent if config_path else Path.cwd()
    groups: dict[str, dict] = {}
    for group, f in options():
        value, source = f.default, None
        if group in table and f.name in table[group]:
            source = Source("toml", f"[{group}] {f.name} in {config_path}")
            value = parse_value(f, table[group][f.name], source)
            if f.name == "packs":  # relative folders in a config file are relative to that file
                value = tuple(_relative_to(base, v) for v in value)
        for env in env_names(f.name, f):
            if environ.get(env, "") != "":
                source = Source("env", env)
                value = parse_value(f, environ[env], source)
                break
        given = getattr(args, f.name, None)
        if given is not None:
            source = Source("flag", flag_name(f.name, f) if f.name != "model" else "MODEL")
            value = parse_value(f, given, source)
        if source is not None:
            check_value(f, value, source)
        groups.setdefault(group, {})[f.name] = value
    _reject_unknown(table, config_path)
    _reject_unknown_variables(environ)
    engine = groups["engine"]
    if engine["model_dir"] is not None:
        if getattr(args, "model", None) is not None:
            raise ConfigError(f"MODEL {args.model!r} and --model-dir / SPINFC_MODEL_DIR {engine['model_dir']!r} "
                              "both name the model to serve: give one of them")
        engine["model"] = str(Path(engine["model_dir"]).expanduser())  # the registry checks the folder
    return Settings(**{g: GROUPS[g](**values) for g, values in groups.items()},
                    config_file=Path(config_path) if config_path else None)


def known_variables() -> set[str]:
    """Every SPINFC_* variable spinfc reads: one or more per setting, and `OTHER_VARIABLES`."""
    return {env for group, f in options() for env in env_names(f.name, f)} | set(OTHER_VARIABLES)


def _reject_unknown_variables(environ: Mapping[str, str]) -> None:
    known = known_variables()
    for name in sorted(environ):
        if name.startswith("SPINFC_") and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"unknown environment variable {name}: {hint}spinfc reads no such variable (an unknown "
                              "TOML key is refused the same way); unset it, or see docs/configuration.md for the "
                              "variables")


def _relative_to(base: Path, source: str) -> str:
    if "://" in source or source.startswith(("git+", "github:")) or Path(source).expanduser().is_absolute():
        return source
    return str(base / source)


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist: fix --config / SPINFC_CONFIG or create it") from None
    except OSError as error:
        raise ConfigError(f"config file {path} cannot be read ({error.strerror}): check its permissions") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def _reject_unknown(table: dict, path) -> None:
    for group, values in table.items():
        if group not in GROUPS or not isinstance(values, dict):
            raise ConfigError(f"{path}: unknown table [{group}]: the tables are "
                              + ", ".join(f"[{g}]" for g in GROUPS) + "; keys go inside one of them")
        known = [f.name for f in attrs.fields(GROUPS[group])]
        for key in values:
            if key not in known:
                raise ConfigError(f"{path}: unknown key {key!r} in [{group}]: the keys of [{group}] are "
                                  + ", ".join(known))
