"""The Dockerfile, parsed (no engine here builds it): `spinfc serve` as the entrypoint, a HEALTHCHECK on /readyz at
the port it exposes, the cache volume where SPINFC_CACHE points, python:3.12-slim, and the CUDA variant."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from spinfc.config import ServerSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    assert parser.structure, "the Dockerfile is empty or did not parse"
    return parser


def instructions(parser: DockerfileParser, name: str) -> list[str]:
    return [item["value"] for item in parser.structure if item["instruction"] == name]


def test_entrypoint_is_spinfc_serve_in_exec_form(dockerfile):
    (entrypoint,) = instructions(dockerfile, "ENTRYPOINT")
    assert json.loads(entrypoint) == ["spinfc", "serve"]  # exec form: `docker run IMAGE --flags` reach spinfc serve
    assert not instructions(dockerfile, "CMD")


def test_it_exposes_the_servers_port_and_listens_on_every_address(dockerfile):
    assert instructions(dockerfile, "EXPOSE") == [str(ServerSettings().port)]
    assert dockerfile.envs["SPINFC_PORT"] == str(ServerSettings().port)
    assert dockerfile.envs["SPINFC_HOST"] == "0.0.0.0"


def test_healthcheck_asks_readyz_on_that_port(dockerfile):
    (check,) = instructions(dockerfile, "HEALTHCHECK")
    assert "/readyz" in check and "SPINFC_PORT" in check and "--start-period=" in check
    command = json.loads(check[check.index("CMD") + 3:].strip())
    assert command[:2] == ["python", "-c"]
    compile(command[2], "<healthcheck>", "exec")  # the probe itself is valid Python


def test_the_caches_are_a_volume(dockerfile):
    (volume,) = instructions(dockerfile, "VOLUME")
    cache = dockerfile.envs["SPINFC_CACHE"]
    assert cache in json.loads(volume)
    for variable in ("HF_HOME", "TRITON_CACHE_DIR"):
        assert dockerfile.envs[variable].startswith(cache + "/")


def test_base_image_and_variants(dockerfile):
    assert dockerfile.baseimage == "python:3.12-slim"  # FROM ${PYTHON_IMAGE}, its default substituted
    assert "ARG PYTHON_IMAGE=python:3.12-slim\n" in dockerfile.lines  # declared before FROM: a build argument
    assert dockerfile.args["VARIANT"] == "cpu"
    (install,) = [run for run in instructions(dockerfile, "RUN") if "pip install" in run]
    assert re.search(r"cpu\).*whl/cpu.*extras=\"serve\"", install)
    assert re.search(r"cuda\).*CUDA_TAG.*extras=\"serve,gpu\"", install)


def test_what_it_copies_is_in_the_checkout(dockerfile):
    for copy in instructions(dockerfile, "COPY"):
        *sources, _ = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), source
