"""Layering of flags > SPINFC_* variables > TOML > defaults, and the errors a wrong value gives."""

import argparse
import re
from pathlib import Path

import attrs
import pytest

from spinfc.config import (
    ConfigError, Settings, add_arguments, env_names, flag_name, load_settings, options,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spinfc serve")
    add_arguments(parser)
    return parser.parse_args(list(argv))


def write(tmp_path: Path, text: str, name: str = "server.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_no_flags_no_environment_no_file_gives_the_defaults():
    settings = load_settings(parse(), environ={})
    assert settings == Settings()
    assert settings.engine.model == "gemma3-270m"
    assert (settings.server.host, settings.server.port, settings.server.queue) == ("0.0.0.0", 8000, None)
    assert settings.engine.warmup == "full" and settings.features.extraction and settings.features.generation
    assert settings.limits.max_content_tokens == 4096 and settings.limits.max_body_bytes == 2_000_000


def test_flag_beats_environment_beats_file_beats_default(tmp_path):
    config = write(tmp_path, "[server]\nport = 8001\nqueue = 9\n[engine]\nwarmup = 'short'\n")
    from_file = load_settings(parse("--config", str(config)), environ={})
    assert (from_file.server.port, from_file.server.queue, from_file.engine.warmup) == (8001, 9, "short")
    from_env = load_settings(parse("--config", str(config)), environ={"SPINFC_PORT": "8002"})
    assert (from_env.server.port, from_env.server.queue) == (8002, 9)
    from_flag = load_settings(parse("--config", str(config), "--port", "8003"), environ={"SPINFC_PORT": "8002"})
    assert (from_flag.server.port, from_flag.server.queue) == (8003, 9)
    assert from_flag.config_file == config


def test_positional_model_and_environment_model():
    assert load_settings(parse("smollm2-135m"), environ={}).engine.model == "smollm2-135m"
    assert load_settings(parse(), environ={"SPINFC_MODEL": "smollm2"}).engine.model == "smollm2"
    assert load_settings(parse("a/b"), environ={"SPINFC_MODEL": "smollm2"}).engine.model == "a/b"


def test_spinfc_config_names_the_file_and_config_flag_overrides_it(tmp_path):
    first = write(tmp_path, "[limits]\nmax_options = 7\n", "a.toml")
    second = write(tmp_path, "[limits]\nmax_options = 8\n", "b.toml")
    assert load_settings(parse(), environ={"SPINFC_CONFIG": str(first)}).limits.max_options == 7
    assert load_settings(parse("--config", str(second)), environ={"SPINFC_CONFIG": str(first)}).limits.max_options == 8


def test_lists_replace_lower_layers_and_file_folders_are_relative_to_the_file(tmp_path):
    config = write(tmp_path, '[features]\npacks = ["./mine", "git+file:///r.git@v1#packs", "/abs"]\n')
    from_file = load_settings(parse("--config", str(config)), environ={})
    assert from_file.features.packs == (str(tmp_path / "mine"), "git+file:///r.git@v1#packs", "/abs")
    from_env = load_settings(parse("--config", str(config)), environ={"SPINFC_PACKS": "x, y ,"})
    assert from_env.features.packs == ("x", "y")
    from_flags = load_settings(parse("--packs", "p", "--packs", "q"), environ={"SPINFC_PACKS": "x"})
    assert from_flags.features.packs == ("p", "q")


@pytest.mark.parametrize("word,expected", [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)])
def test_boolean_variables(word, expected):
    assert load_settings(parse(), environ={"SPINFC_EXTRACTION": word}).features.extraction is expected


def test_boolean_flags():
    settings = load_settings(parse("--no-extraction", "--no-generation", "--no-official-packs", "--debug"), {})
    assert not settings.features.extraction and not settings.features.generation
    assert settings.features.no_official_packs and settings.server.debug
    assert load_settings(parse("--extraction"), {"SPINFC_EXTRACTION": "0"}).features.extraction is True
    assert load_settings(parse("--no-warmup"), {}).engine.warmup == "none"


def test_trusted_token_has_two_variable_names_and_is_masked_in_repr():
    assert load_settings(parse(), {"SPINFC_ENGINE_TOKEN": "s3"}).server.trusted_token == "s3"
    settings = load_settings(parse(), {"SPINFC_TRUSTED_TOKEN": "s3", "SPINFC_TOKEN": "hunter2"})
    assert settings.server.trusted_token == "s3" and settings.server.token == "hunter2"
    assert "hunter2" not in repr(settings) and "s3" not in repr(settings)


def test_empty_variable_is_unset():
    assert load_settings(parse(), {"SPINFC_PORT": ""}).server.port == 8000


def test_environment_type_error_names_variable_and_fix():
    with pytest.raises(ConfigError) as error:
        load_settings(parse(), {"SPINFC_PORT": "eighty"})
    assert "SPINFC_PORT='eighty'" in str(error.value) and "expected an integer" in str(error.value)
    assert "set SPINFC_PORT=8000" in str(error.value)
    with pytest.raises(ConfigError, match=r"SPINFC_DEBUG='maybe'.*one of 1/true/yes/on/0/false/no/off"):
        load_settings(parse(), {"SPINFC_DEBUG": "maybe"})


def test_file_type_error_names_table_key_file_and_fix(tmp_path):
    config = write(tmp_path, '[server]\nport = "8000"\n')
    with pytest.raises(ConfigError) as error:
        load_settings(parse("--config", str(config)), {})
    message = str(error.value)
    assert f"[server] port in {config}" in message and "got str '8000'" in message and "write port = 8000" in message
    config = write(tmp_path, '[features]\npacks = "./mine"\n')
    with pytest.raises(ConfigError, match=r'write packs = \["x", "y"\]'):
        load_settings(parse("--config", str(config)), {})
    config = write(tmp_path, "[features]\nextraction = 1\n")
    with pytest.raises(ConfigError, match="write extraction = true"):
        load_settings(parse("--config", str(config)), {})


def test_range_and_choice_errors_name_the_source(tmp_path):
    with pytest.raises(ConfigError, match=r"--port 70000 \(command line\): must be at most 65,535"):
        load_settings(parse("--port", "70000"), {})
    with pytest.raises(ConfigError, match=r"SPINFC_MAX_OPTIONS='0'.*must be at least 1"):
        load_settings(parse(), {"SPINFC_MAX_OPTIONS": "0"})
    with pytest.raises(ConfigError, match=r"SPINFC_WARMUP='fast'.*must be one of full, short, none"):
        load_settings(parse(), {"SPINFC_WARMUP": "fast"})
    config = write(tmp_path, "[engine]\ntoken_budget = 16\n")
    with pytest.raises(ConfigError, match=r"\[engine\] token_budget in .*must be at least 128"):
        load_settings(parse("--config", str(config)), {})


def test_unknown_table_or_key_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'prot' in \[server\].*host, port"):
        load_settings(parse("--config", str(write(tmp_path, "[server]\nprot = 1\n"))), {})
    with pytest.raises(ConfigError, match=r"unknown table \[limit\].*\[limits\]"):
        load_settings(parse("--config", str(write(tmp_path, "[limit]\nmax_options = 1\n"))), {})
    with pytest.raises(ConfigError, match=r"unknown table \[port\]"):
        load_settings(parse("--config", str(write(tmp_path, "port = 1\n"))), {})


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(parse("--config", str(tmp_path / "nope.toml")), {})
    with pytest.raises(ConfigError, match="is not valid TOML.*line 1"):
        load_settings(parse("--config", str(write(tmp_path, "[server\n"))), {})


def test_help_lists_every_flag_with_its_default_variable_and_key():
    parser = argparse.ArgumentParser(prog="spinfc serve")
    add_arguments(parser)
    text = re.sub(r"\s+", " ", parser.format_help())
    assert "MODEL" in text and "--config FILE" in text
    for group, f in options():
        if f.name == "model":
            continue
        assert flag_name(f.name, f) in text, f.name
        assert env_names(f.name, f)[0] in text, f.name
        assert f"[{group}] {f.name})" in text, f.name
    assert "most tokens in one input's content (default: 4096; SPINFC_MAX_CONTENT_TOKENS" in text
    assert "(default: 2,000,000; SPINFC_MAX_PROCESSED_TOKENS" in text
    assert "port to listen on (default: 8000; SPINFC_PORT" in text


def _sample(f):
    """A value different from the default, as (python value, TOML literal, variable text, flag argv)."""
    kind, flag = f.metadata["kind"], flag_name(f.name, f)
    if kind == "bool":
        value = not f.default
        argv = [flag] if f.default is False else ["--no-" + flag[2:]]
        return value, str(value).lower(), str(value).lower(), argv
    if kind in ("int", "optional_int"):
        n = min(300, f.metadata["rules"].get("maximum", 300))
        return n, str(n), str(n), [flag, str(n)]
    if kind == "list":
        return ("/v",), '["/v"]', "/v", [flag, "/v"]
    if kind == "choice":
        value = f.metadata["rules"]["choices"][-1]
        return value, f'"{value}"', value, [flag, value]
    if kind == "optional_size":
        return 24 << 30, '"24GiB"', "24 GiB", [flag, "24G"]
    return "v", '"v"', "v", ["v"] if f.name == "model" else [flag, "v"]


def test_every_setting_can_come_from_each_layer(tmp_path):
    """A non-default value per setting through each layer, so no field is left out of flags, variables or keys."""
    for group, f in options():
        value, literal, text, argv = _sample(f)
        assert value != f.default, f.name
        config = write(tmp_path, f"[{group}]\n{f.name} = {literal}\n")
        assert getattr(getattr(load_settings(parse("--config", str(config)), {}), group), f.name) == value, f.name
        env = env_names(f.name, f)[0]
        assert getattr(getattr(load_settings(parse(), {env: text}), group), f.name) == value, f.name
        assert getattr(getattr(load_settings(parse(*argv), {}), group), f.name) == value, f.name


def test_resolved_budget_follows_the_device():
    from spinfc.config import EngineSettings

    assert EngineSettings(device="cpu").resolved_budget() == 2048
    assert EngineSettings(device="cuda:1").resolved_budget() == 16384
    assert EngineSettings(device="cpu", token_budget=4096).resolved_budget() == 4096
    assert attrs.evolve(EngineSettings(), device="cpu").resolved_device() == "cpu"


def test_model_dir_serves_a_local_folder_from_the_flag_or_the_variable(tmp_path):
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "config.json").write_text("{}")
    assert load_settings(parse("--model-dir", str(snapshot)), environ={}).engine.model == str(snapshot)
    from_env = load_settings(parse(), environ={"SPINFC_MODEL_DIR": str(snapshot)})
    assert from_env.engine.model == str(snapshot) and from_env.engine.model_dir == str(snapshot)
    with pytest.raises(ConfigError, match="give one of them"):
        load_settings(parse("smollm2-135m", "--model-dir", str(snapshot)), environ={})
    from spinfc.registry import ModelNotFound, resolve

    missing = load_settings(parse("--model-dir", str(tmp_path / "missing")), environ={}).engine.model
    with pytest.raises(ModelNotFound, match="missing does not exist"):
        resolve(missing)


def test_an_unknown_spinfc_variable_refuses_the_start_as_an_unknown_key_does():
    with pytest.raises(ConfigError, match="unknown environment variable SPINFC_MODLE: did you mean SPINFC_MODEL"):
        load_settings(parse(), environ={"SPINFC_MODLE": "smollm2-135m"})
    with pytest.raises(ConfigError, match="SPINFC_FOO"):
        load_settings(parse(), environ={"SPINFC_FOO": "1"})
    known = {"SPINFC_CACHE": "/tmp/c", "SPINFC_CACHE_DIRS": "/models", "SPINFC_CONFIG": "", "SPINFC_API_KEY": "k",
             "SPINFC_BASE_URL": "http://x", "SPINFC_TEST_SEED": "1", "OTHER_TOOL_X": "1"}
    assert load_settings(parse(), environ=known).server.token == "k"


def test_cache_dirs_are_searched_for_a_model_by_name(tmp_path, monkeypatch):
    from spinfc.registry import ModelNotFound, resolve

    plain = tmp_path / "volume" / "acme" / "tiny"
    plain.mkdir(parents=True)
    (plain / "config.json").write_text("{}")
    hub = tmp_path / "hub" / "models--org--other" / "snapshots" / "abc123"
    hub.mkdir(parents=True)
    (hub / "config.json").write_text("{}")
    gguf = tmp_path / "volume" / "q4"
    gguf.mkdir()
    (gguf / "q4.gguf").write_bytes(b"")
    monkeypatch.setenv("SPINFC_CACHE_DIRS", f"{tmp_path / 'volume'}:{tmp_path / 'hub'}")
    found = resolve("acme/tiny")
    assert (found.name, found.directory, found.aliases) == ("acme/tiny", plain, (str(plain),))
    assert resolve("org/other").directory == hub and resolve("q4").gguf == gguf / "q4.gguf"
    with pytest.raises(ModelNotFound, match="nor in SPINFC_CACHE_DIRS"):
        resolve("nothing-here")
    monkeypatch.delenv("SPINFC_CACHE_DIRS")
    assert resolve("acme/tiny").repo_id == "acme/tiny"  # without the volume: a Hub repo id
