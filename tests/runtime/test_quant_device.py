"""`spinfc quantize --device`, on the CPU, on a tiny random Llama snapshot with SmolLM2's tokenizer: `--device cpu`
writes the checkpoint that no flag writes, byte for byte; a device this machine lacks is one line and exit 2 before
any work; every tensor of the path takes its device from the parameter (under a default device of meta, where a
tensor made without it holds no values, the same checkpoint is written); and the float64 sums that make GPTQ's
arithmetic the same on any device do not depend on the order they are summed in, where float32's do."""

from __future__ import annotations

import json

import pytest
import torch

from spinfc.cli import main
from spinfc.runtime.quant.gptq import rounded_product
from spinfc.runtime.quant.quantize import quantize_model

from .tiny_llama import tiny_llama

TEXTS = ("A refund for my order, please.", "The parcel came late and the box was broken.",
         "How do I change the password of my account?")
FILES = ("model.safetensors", "config.json", "recipe.yaml", "calibration.json")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("device-source")
    calibration = folder / "calibration.jsonl"
    calibration.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS))
    return tiny_llama(folder / "llama"), calibration


def written(directory) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in FILES}


def test_device_cpu_writes_the_checkpoint_that_no_flag_writes(source, tmp_path, capsys):
    model, calibration = source
    common = ["quantize", str(model), "--scheme", "w4a16", "--group-size", "32", "--calibration", str(calibration)]
    assert main([*common, "-o", str(tmp_path / "plain")]) == 0
    assert main([*common, "--device", "cpu", "-o", str(tmp_path / "cpu")]) == 0
    assert "(w4a16) on cpu; calibration:" in capsys.readouterr().err
    assert written(tmp_path / "plain") == written(tmp_path / "cpu")


@pytest.mark.parametrize("device, says", [
    ("cuda:99", "--device cuda:99: this machine cannot hold tensors there ("),
    ("gpu", "--device 'gpu' is not a torch device: give cpu, or cuda:N"),
    ("meta", "--device meta holds no values"),
] + ([] if torch.accelerator.is_available() else
     [("cuda:0", "--device cuda:0: this machine cannot hold tensors there (Torch not compiled with CUDA enabled)")]))
def test_a_device_this_machine_lacks_is_one_line_before_any_work(source, tmp_path, capsys, device, says):
    model, calibration = source
    out = tmp_path / "out"
    status = main(["quantize", str(model), "--scheme", "w4a16", "--group-size", "32", "--calibration",
                   str(calibration), "--device", device, "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("spinfc quantize: ") and says in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "this machine has cpu" in err, err
    assert not out.exists()  # nothing read or written


@pytest.mark.parametrize("scheme, group", [("w4a16", 32), ("fp8-static", None)])
def test_every_tensor_of_the_path_takes_its_device_from_the_parameter(source, tmp_path, scheme, group):
    """On a GPU a tensor made without the device lands on the CPU and fails (or is slow) far from where it was
    made; here one lands on meta, which holds no values, so the checkpoint would not be written, or not the same."""
    model, calibration = source
    quantize_model(str(model), scheme, calibration, tmp_path / "default", group_size=group)
    with torch.device("meta"):
        quantize_model(str(model), scheme, calibration, tmp_path / "meta", device="cpu", group_size=group)
    assert written(tmp_path / "meta") == written(tmp_path / "default")


def test_rounded_products_do_not_depend_on_the_order_of_their_sums(seed):
    """What another device's GEMM changes is the order of the sums: here, the inner index permuted. In float64
    rounded once, at most a few of 131,072 sums land on a float32 tie (measured: 1 in 2.6 million), each one
    float32 step off; in float32 most of them differ."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(128, 512, generator=g), torch.randn(512, 1024, generator=g)
    order = torch.randperm(512, generator=g)
    ours, reordered = rounded_product(a, b), rounded_product(a[:, order], b[order])
    apart = ours != reordered
    assert int(apart.sum()) <= 3
    assert torch.equal(torch.nextafter(ours[apart], reordered[apart]), reordered[apart])  # one step at most
    assert int(((a @ b) != (a[:, order] @ b[order])).sum()) > a.shape[0] * b.shape[1] // 2  # float32: most differ
