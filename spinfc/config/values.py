"""Reading one setting's value from a flag, an environment variable or a TOML key, with errors that name the
key, where the value came from and what to write instead."""

from __future__ import annotations

import attrs

from spinfc.config.sizes import EXAMPLE as SIZE_EXAMPLE
from spinfc.config.sizes import parse_size

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
KIND_WORDS = {
    "int": "an integer", "optional_int": "an integer", "str": "a string", "optional_str": "a string",
    "bool": "true or false", "list": "a list of strings", "choice": "one of the listed words",
    "optional_size": f"a size, e.g. {SIZE_EXAMPLE}",
}


def setting(default, help: str, kind: str, *, env: tuple[str, ...] = (), flag: str | None = None,
            aliases: tuple[str, ...] = (), metavar: str | None = None, secret: bool = False, **rules):
    """A settings field: `kind` is int, str, optional_str, optional_int, optional_size (bytes, written `24GiB`:
    sizes.py), bool, list or choice; `rules` are
    minimum, maximum, choices; `env` replaces the default variable name SPINFC_<KEY> (the first given wins);
    `aliases` are other flags for the same setting; a `secret` is masked in the settings' repr."""
    metadata = {"help": help, "kind": kind, "env": env, "flag": flag, "aliases": aliases, "rules": rules,
                "secret": secret, "metavar": metavar}
    value = default if not isinstance(default, list) else tuple(default)
    return attrs.field(default=value, metadata=metadata, repr=_masked if secret else True)


def _masked(value) -> str:
    return "None" if value is None else "'***'"


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the key, its source and what to do. Refuses the start."""


@attrs.frozen
class Source:
    kind: str  # "flag", "env" or "toml"
    name: str  # the flag (--port), the variable (SPINFC_PORT) or the key ([server] port in server.toml)


def describe_default(f: attrs.Attribute) -> str:
    """The default as the docs and --help print it."""
    value = f.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return "none" if not value else ", ".join(value)
    if isinstance(value, int):
        return f"{value:,}" if value >= 10_000 else str(value)
    return str(value)


def _example(f: attrs.Attribute) -> str:
    kind, default = f.metadata["kind"], f.default
    if kind in ("int", "optional_int"):
        return str(default if default is not None else f.metadata["rules"].get("minimum", 1))
    if kind == "bool":
        return "true"
    if kind == "list":
        return "x,y"
    if kind == "choice":
        return f.metadata["rules"]["choices"][0]
    if kind == "optional_size":
        return "24GiB"
    return "value"


def _fail(f: attrs.Attribute, raw, source: Source, problem: str | None = None):
    kind = f.metadata["kind"]
    problem = problem or f"expected {KIND_WORDS[kind]}"
    example = _example(f)
    if source.kind == "env":
        fix = f"set {source.name}={example}, or unset it for the default"
        if kind == "bool":
            fix = f"set {source.name} to one of {'/'.join(TRUE_WORDS + FALSE_WORDS)}, or unset it"
        raise ConfigError(f"{source.name}='{raw}' (environment variable): {problem}; {fix}")
    if source.kind == "toml":
        literal = {"bool": "true", "list": '["x", "y"]'}.get(kind)
        literal = literal or (example if kind in ("int", "optional_int") else f'"{example}"')
        raise ConfigError(f"{source.name}: {problem}, got {type(raw).__name__} {raw!r}; write {f.name} = {literal}")
    raise ConfigError(f"{source.name} {raw!r} (command line): {problem}")


def parse_value(f: attrs.Attribute, raw, source: Source):
    """`raw` as the field's type: strings from the environment are converted; TOML and flag values must already
    have the right type (TOML has integers, booleans and arrays of its own)."""
    kind = f.metadata["kind"]
    from_text = source.kind == "env"
    if kind in ("int", "optional_int"):
        if from_text:
            try:
                return int(raw.strip().replace(",", "_"))
            except ValueError:
                _fail(f, raw, source)
        if not isinstance(raw, int) or isinstance(raw, bool):
            _fail(f, raw, source)
        return raw
    if kind == "bool":
        if from_text:
            word = raw.strip().lower()
            if word in TRUE_WORDS + FALSE_WORDS:
                return word in TRUE_WORDS
            _fail(f, raw, source)
        if not isinstance(raw, bool):
            _fail(f, raw, source)
        return raw
    if kind == "optional_size":  # text from anywhere; a TOML integer is bytes
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw if raw > 0 else _fail(f, raw, source, "must be a size above 0")
        if not isinstance(raw, str):
            _fail(f, raw, source)
        try:
            return parse_size(raw)
        except ValueError:
            _fail(f, raw, source, f"expected {KIND_WORDS[kind]}")
    if kind == "list":
        if from_text:
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if not isinstance(raw, (list, tuple)) or not all(isinstance(v, str) for v in raw):
            _fail(f, raw, source)
        return tuple(raw)
    if not isinstance(raw, str):
        _fail(f, raw, source)
    return raw


def check_value(f: attrs.Attribute, value, source: Source) -> None:
    """Range and choice rules of the field; raises `ConfigError` naming the source."""
    rules = f.metadata["rules"]
    if value is None:
        return
    if "choices" in rules and value not in rules["choices"]:
        _fail(f, value, source, f"must be one of {', '.join(rules['choices'])}")
    if "minimum" in rules and value < rules["minimum"]:
        _fail(f, value, source, f"must be at least {rules['minimum']:,}")
    if "maximum" in rules and value > rules["maximum"]:
        _fail(f, value, source, f"must be at most {rules['maximum']:,}")
