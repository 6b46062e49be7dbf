"""A malformed model folder is one line naming the file, the key or tensor, and what to do; never a traceback
(issue 38): a valid random-weight folder written by transformers, mutated many ways, each read through the loader
in-process; the same through `spinfc quantize` and the router (whose other model keeps serving); one real
`spinfc serve` run."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file

from spinfc.cli import main
from spinfc.config import Settings
from spinfc.errors import BadModelFiles
from spinfc.registry import load_tokenizer
from spinfc.runtime.load.loader import load_model
from tests.runtime.tiny_llama import tiny_llama

REPO = Path(__file__).resolve().parents[2]
RESTORE = "restore it from the model's original config.json"
MISMATCH = "the weights do not match config.json"


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> Path:
    """A llama folder of random weights (seed 0) with SmolLM2's tokenizer, as transformers saves it."""
    return tiny_llama(tmp_path_factory.mktemp("valid"), max_position_embeddings=256)


def edit_config(change):
    def mutate(folder: Path) -> None:
        hf = json.loads((folder / "config.json").read_text())
        change(hf)
        (folder / "config.json").write_text(json.dumps(hf))
    return mutate


def edit_tensors(change):
    def mutate(folder: Path) -> None:
        path = folder / "model.safetensors"
        state = load_file(str(path))
        change(state)
        save_file(state, str(path), metadata={"format": "pt"})
    return mutate


def write(name: str, text: str):
    return lambda folder: (folder / name).write_text(text)


def cut_in_half(folder: Path) -> None:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def remove(*names: str):
    return lambda folder: [(folder / name).unlink() for name in names]


Q1 = "model.layers.1.self_attn.q_proj.weight"
DOWN1 = "model.layers.1.mlp.down_proj.weight"
# mutation -> (the file the line names, what else it must name)
CASES = {
    "only two keys": (write("config.json", '{"model_type": "llama", "hidden_size": 64}'), "config.json",
                      ["'num_attention_heads'", RESTORE]),
    "not json": (write("config.json", "{not json"), "config.json:1:2", ["not JSON", RESTORE]),
    "a list": (write("config.json", "[1, 2]"), "config.json", ["JSON list", RESTORE]),
    "unknown model_type": (edit_config(lambda c: c.update(model_type="gpt9")), "config.json",
                           ["'gpt9'", "llama, qwen3"]),
    "no model_type": (edit_config(lambda c: c.pop("model_type")), "config.json", ["'model_type'", RESTORE]),
    "no vocab_size": (edit_config(lambda c: c.pop("vocab_size")), "config.json", ["'vocab_size'", RESTORE]),
    "heads as a string": (edit_config(lambda c: c.update(num_attention_heads="4")), "config.json",
                          ["'num_attention_heads' is \"4\"", RESTORE]),
    "hidden size a fraction": (edit_config(lambda c: c.update(hidden_size=32.5)), "config.json",
                               ["'hidden_size' is 32.5", RESTORE]),
    "eps a string": (edit_config(lambda c: c.update(rms_norm_eps="small")), "config.json",
                     ["'rms_norm_eps'", RESTORE]),
    "heads that do not fit the weights": (edit_config(lambda c: c.update(num_attention_heads=8)),
                                          "model.safetensors", ["'model.layers.0.self_attn.q_proj.weight'", MISMATCH]),
    "more layers than weights": (edit_config(lambda c: c.update(num_hidden_layers=3)), "model.safetensors",
                                 ["'model.layers.2.", MISMATCH]),
    "another vocabulary": (edit_config(lambda c: c.update(vocab_size=1000)), "model.safetensors",
                           ["'model.embed_tokens.weight'", "[1000, 32]", MISMATCH]),
    "a tensor missing": (edit_tensors(lambda s: s.pop(DOWN1)), "model.safetensors", [f"'{DOWN1}'", MISMATCH]),
    "a tensor renamed": (edit_tensors(lambda s: s.update({"model.layers.1.mlp.down.weight": s.pop(DOWN1)})),
                         "model.safetensors", [f"'{DOWN1}'", MISMATCH]),
    "a tensor of no use": (edit_tensors(lambda s: s.update({"model.extra.weight": torch.zeros(3)})),
                           "model.safetensors", ["model.extra.weight", MISMATCH]),
    "a projection's shape": (edit_tensors(lambda s: s.update({Q1: torch.zeros(16, 32)})), "model.safetensors",
                             [f"'{Q1}'", "[16, 32]", "[32, 32]", MISMATCH]),
    "a norm's shape": (edit_tensors(lambda s: s.update({"model.layers.1.input_layernorm.weight": torch.zeros(31)})),
                       "model.safetensors", ["'model.layers.1.input_layernorm.weight'", MISMATCH]),
    "weights cut in half": (cut_in_half, "model.safetensors", ["truncated at byte", "re-download"]),
    "no weights": (remove("model.safetensors"), "", ["no *.safetensors file"]),
    "no tokenizer": (remove("tokenizer.json", "tokenizer_config.json"), "", ["no tokenizer", "tokenizer files"]),
}


def mutated(valid: Path, tmp_path: Path, case: str) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(valid, folder)
    CASES[case][0](folder)
    return folder


def assert_one_line(message: str, folder: Path, case: str) -> None:
    _, file, needles = CASES[case]
    assert "\n" not in message and "Traceback" not in message, message
    assert file in message and (file or str(folder) in message), message
    for needle in needles:
        assert needle in message, (needle, message)


def test_the_valid_folder_loads_and_scores_as_transformers(valid) -> None:
    from transformers import AutoModelForCausalLM

    from .test_parity_random import _random_case
    from .tree_launch import build_launch, transformers_logprobs

    ours = load_model(str(valid))
    theirs = AutoModelForCausalLM.from_pretrained(valid, dtype=torch.float32).eval()
    case = _random_case(torch.Generator().manual_seed(1), 10)
    launch, _ = build_launch([(0, case)], 64)
    got, want = ours.forward(launch), transformers_logprobs(theirs, case)
    assert (got - want).abs().max().item() < 1e-4


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_folder_is_one_line_naming_the_file_and_what_to_do(valid, tmp_path, case) -> None:
    folder = mutated(valid, tmp_path, case)
    with pytest.raises(BadModelFiles) as raised:  # what a server loads: the stack, then its tokenizer
        load_model(str(folder))
        load_tokenizer(str(folder))
    assert_one_line(str(raised.value), folder, case)


def test_a_tokenizer_transformers_cannot_read_is_one_line(valid, tmp_path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(valid, folder)
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(BadModelFiles) as raised:
        load_tokenizer(str(folder))
    assert "\n" not in str(raised.value) and str(folder) in str(raised.value) and "tokenizer" in str(raised.value)


@pytest.fixture(scope="module")
def quantized(valid, tmp_path_factory) -> Path:
    calibration = tmp_path_factory.mktemp("calibration") / "texts.jsonl"
    calibration.write_text("".join(json.dumps({"text": f"Calibration text number {i}."}) + "\n" for i in range(4)))
    out = tmp_path_factory.mktemp("quantized") / "int8"
    assert main(["quantize", str(valid), "--scheme", "int8-static", "--calibration", str(calibration),
                 "-o", str(out)]) == 0
    return out


def test_a_quantized_checkpoint_cut_in_half_is_one_line(quantized, tmp_path) -> None:
    folder = tmp_path / "cut"
    shutil.copytree(quantized, folder)
    cut_in_half(folder)
    with pytest.raises(BadModelFiles) as raised:
        load_model(str(folder))
    assert_one_line(str(raised.value), folder, "weights cut in half")


@pytest.mark.parametrize("case", ["not json", "only two keys", "a projection's shape", "weights cut in half",
                                  "no tokenizer"])
def test_quantize_says_the_same_line_and_exits_2(valid, quantized, tmp_path, case, capsys) -> None:
    folder = mutated(valid, tmp_path, case)
    capsys.readouterr()
    status = main(["quantize", str(folder), "--scheme", "int8-static", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2, err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("spinfc quantize: ") and "Traceback" not in err, err
    assert_one_line(last.removeprefix("spinfc quantize: "), folder, case)


def test_the_router_fails_the_malformed_model_alone(valid, tmp_path) -> None:
    from spinfc.router import create_router_app, read_models
    from tests.server.live import live_server

    broken = mutated(valid, tmp_path, "a projection's shape")
    models = tmp_path / "models.toml"
    models.write_text(f'[models.good]\nmodel = "{valid}"\nwarmup = "none"\n\n'
                      f'[models.broken]\nmodel = "{broken}"\nwarmup = "none"\n')
    settings = Settings()
    body = {"messages": [{"role": "user", "content": "hello"}],
            "scoring": {"queries": [{"id": "q", "template": "\n\nOK?<?>", "options": [" yes", " no"]}]}}
    with live_server(create_router_app(settings, read_models(models, settings))) as url:
        for _ in range(2):  # the broken one fails each time it is asked for; the other serves throughout
            failed = httpx.post(f"{url}/v1/score", json={**body, "model": "broken"}, timeout=120)
            assert failed.status_code == 503, failed.text
            assert_one_line(failed.json()["error"]["message"], broken, "a projection's shape")
            served = httpx.post(f"{url}/v1/score", json={**body, "model": "good"}, timeout=120)
            assert served.status_code == 200, served.text


@pytest.mark.slow
def test_serve_exits_2_with_the_line(valid, tmp_path) -> None:
    folder = mutated(valid, tmp_path, "only two keys")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = subprocess.run([sys.executable, "-m", "spinfc.cli", "serve", str(folder), "--host", "127.0.0.1",
                           "--port", str(port), "--warmup", "none"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                             "HOME": str(Path.home())})
    assert done.returncode == 2, done.stderr
    last = done.stderr.rstrip().splitlines()[-1]
    assert last.startswith("spinfc serve: ") and "Traceback" not in done.stderr, done.stderr
    assert_one_line(last.removeprefix("spinfc serve: "), folder, "only two keys")
