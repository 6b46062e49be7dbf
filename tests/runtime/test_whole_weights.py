"""Weights that are not whole are one located line, never a traceback (issue 24): a truncated safetensors file names
the byte it ends at and the size its header promises; a truncated or zeroed GGUF says what the reader found; a
calibration file that is not UTF-8 names its line; `spinfc serve` on such weights exits 2 with that line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from spinfc.cli import main
from spinfc.errors import CorruptWeights
from spinfc.registry import resolve
from spinfc.runtime.weights.gguf_file import read_gguf
from spinfc.whole_files import check_safetensors

REPO = Path(__file__).resolve().parents[2]


def test_a_truncated_safetensors_file_names_where_it_ends_and_what_it_should_hold(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"a": torch.zeros(64, 64), "b": torch.ones(32)}, str(path))
    check_safetensors(path)  # whole: passes
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:size - 1000])
    with pytest.raises(CorruptWeights) as raised:
        check_safetensors(path)
    assert str(raised.value) == f"model.safetensors: truncated at byte {size - 1000:,} of {size:,}; re-download it"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(CorruptWeights, match="model.safetensors: not a safetensors file"):
        check_safetensors(path)


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_a_damaged_gguf_is_one_located_line(tmp_path, damage):
    packaged = resolve("smollm2-135m").gguf
    path = tmp_path / "model.gguf"
    with open(packaged, "rb") as stream:
        head = stream.read(3 << 20)  # past the header and tensor table, short of the weights
    path.write_bytes(head if damage == "truncated" else bytes(len(head)))
    with pytest.raises(CorruptWeights) as raised:
        read_gguf(path)
    message = str(raised.value)
    assert message.startswith(f"model.gguf: not a whole GGUF file ({len(head):,} bytes") and "re-download" in message


def test_a_calibration_file_that_is_not_utf8_is_exit_2_naming_its_line(tmp_path, capsys):
    calibration = tmp_path / "cal.jsonl"
    calibration.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    status = main(["quantize", "smollm2-135m", "--scheme", "int8-static", "--calibration", str(calibration),
                   "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and f"{calibration}:2: not UTF-8" in err and "Traceback" not in err


@pytest.mark.slow
def test_serve_exits_2_with_the_line_when_its_model_cannot_load(tmp_path):
    model = tmp_path / "broken.gguf"
    model.write_bytes(bytes(4096))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = subprocess.run([sys.executable, "-m", "spinfc.cli", "serve", str(model), "--host", "127.0.0.1",
                           "--port", str(port), "--warmup", "none"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("spinfc serve: broken.gguf: not a whole GGUF file")
    assert "Traceback" not in done.stderr
