"""`--max-memory SIZE`: the size as people write it (24GiB, 24 GiB, 24GB, 24G, bytes), from a flag, a variable or a
TOML key, and refused with the source named where it is not a size; the accounting that sizes the content cache
under it (sizes in, the cache's room out) and its one-line refusal naming each part in GiB."""

from __future__ import annotations

import argparse

import pytest

from spinfc.config import ConfigError, add_arguments, load_settings
from spinfc.config.sizes import parse_size
from spinfc.runtime.load.memory import Footprint, MemoryTooSmall, plan_room

GiB = 2**30


@pytest.mark.parametrize("text, size", [("24GiB", 24 * GiB), ("24 GiB", 24 * GiB), ("24gib", 24 * GiB),
                                        ("24G", 24 * GiB), ("24GB", 24 * 10**9), ("25769803776", 24 * GiB),
                                        ("1.5TiB", 1536 * GiB), ("512MiB", 512 * 2**20), ("80KB", 80_000)])
def test_a_size_is_read_as_people_write_it(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "24 XB", "0GiB", "-1G", "2.5e3", "24 GiB of it"])
def test_what_is_not_a_size_says_what_one_looks_like(text):
    with pytest.raises(ValueError, match=r"e\.g\. 24GiB \(or 24GB, 24G, or bytes\)"):
        parse_size(text)


def settings(argv=(), environ=None, toml=None, tmp_path=None):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    if toml is not None:
        (tmp_path / "spinfc.toml").write_text(f"[engine]\nmax_memory = {toml}\n")
        argv = [*argv, "--config", str(tmp_path / "spinfc.toml")]
    return load_settings(parser.parse_args(list(argv)), environ or {})


def test_the_setting_comes_from_a_flag_a_variable_or_a_toml_key(tmp_path):
    assert settings().engine.max_memory is None
    assert settings(["--max-memory", "24GiB"]).engine.max_memory == 24 * GiB
    assert settings(environ={"SPINFC_MAX_MEMORY": "24GB"}).engine.max_memory == 24 * 10**9
    assert settings(toml='"24G"', tmp_path=tmp_path).engine.max_memory == 24 * GiB
    assert settings(toml=str(24 * GiB), tmp_path=tmp_path).engine.max_memory == 24 * GiB  # a TOML integer: bytes


def test_a_bad_size_names_where_it_came_from(tmp_path):
    with pytest.raises(ConfigError, match=r"^--max-memory '24 XB' \(command line\): expected a size, e\.g\. 24GiB"):
        settings(["--max-memory", "24 XB"])
    with pytest.raises(ConfigError, match=r"^SPINFC_MAX_MEMORY='lots' \(environment variable\): .*; set "
                       r"SPINFC_MAX_MEMORY=24GiB, or unset it"):
        settings(environ={"SPINFC_MAX_MEMORY": "lots"})
    with pytest.raises(ConfigError, match=r'max_memory in .*: expected a size.*; write max_memory = "24GiB"'):
        settings(toml="true", tmp_path=tmp_path)


def test_the_cache_takes_what_the_limit_leaves_within_what_is_free():
    parts = Footprint(weights=14 * GiB, state=GiB // 2, kv=3 * GiB, workspaces=4 * GiB)
    assert parts.total == 21 * GiB + GiB // 2
    assert plan_room(24 * GiB, parts, free=60 * GiB, budget=16384) == 2 * GiB + GiB // 2
    assert plan_room(24 * GiB, parts, free=GiB, budget=16384) == GiB  # the device has less free than the limit
    assert plan_room(parts.total, parts, free=60 * GiB, budget=16384) == 0  # it fits, with no room for a cache


def test_what_does_not_fit_is_named_part_by_part_in_one_line():
    parts = Footprint(weights=int(13.9 * GiB), state=int(0.9 * GiB), kv=int(5.5 * GiB), workspaces=int(6.2 * GiB))
    with pytest.raises(MemoryTooSmall) as refused:
        plan_room(24 * GiB, parts, free=80 * GiB, budget=16384)
    assert str(refused.value) == (
        "--max-memory 24.0 GiB does not hold this model at --token-budget 16,384: weights 13.9 GiB + state 0.9 GiB "
        "+ K/V 5.5 GiB + workspaces 6.2 GiB = 26.5 GiB; serve a quantized checkpoint (spinfc quantize --scheme "
        "w4a16), lower --token-budget (K/V and workspaces grow with it) or raise --max-memory")
