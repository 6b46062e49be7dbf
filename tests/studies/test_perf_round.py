"""The performance round's parts that need no GPU: the profile's sorting of kernels and gaps, the products read
from a snapshot's headers, fresh contents, and the whole round on tiny models on the CPU (`--smoke`, slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from benchmarks import perf_round
from benchmarks.harness import jobs, profiling
from benchmarks.harness.products import products

STUDIES = Path(perf_round.__file__).parent


def test_kernels_are_sorted_into_the_parts_of_a_pass():
    assert profiling.part_of("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64") == "products"
    assert profiling.part_of("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_TNN") == "products"
    assert profiling.part_of("_tree_attention_kernel") == "attention"
    assert profiling.part_of("_rms_norm_kernel") == "norms/rope/activations"
    assert profiling.part_of("_quantize_rows_kernel") == "quantize"
    assert profiling.part_of("chunk_gated_delta_rule_fwd_kernel_h") == "recurrent scan"
    assert profiling.part_of("_row_logsumexp_kernel") == "answer head"
    assert profiling.part_of("Memcpy HtoD (Pinned -> Device)") == "copies"
    assert profiling.part_of("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*") == \
        "row gathers"
    assert profiling.part_of("void at::native::vectorized_elementwise_kernel<4>") == "other elementwise"


def test_the_breakdown_adds_up_busy_time_and_sorts_the_gaps():
    kernels = [["gemm_a", 0.0, 100.0], ["_rms_norm_kernel", 105.0, 10.0], ["gemm_b", 165.0, 35.0],
               ["_tree_attention_kernel", 1200.0, 300.0]]
    got = profiling.breakdown(kernels, wall_s=0.002)
    assert got["parts_ms"] == {"products": 0.135, "attention": 0.3, "norms/rope/activations": 0.01}
    assert got["idle_ms"] == {"under 10 us": 0.005, "10-100 us": 0.05, "over 100 us": 1.0}
    assert got["kernel_span_ms"] == 1.5 and got["outside_span_ms"] == 0.5
    assert profiling.breakdown([], 1.0) == {"error": "no kernels were recorded"}


def test_the_products_of_a_snapshot_fuse_what_shares_an_input(tmp_path):
    D, I, Hq, Hk = 64, 96, 128, 32
    names = {"self_attn.q_proj": (Hq, D), "self_attn.k_proj": (Hk, D), "self_attn.v_proj": (Hk, D),
             "self_attn.o_proj": (D, Hq), "mlp.gate_proj": (I, D), "mlp.up_proj": (I, D), "mlp.down_proj": (D, I),
             "input_layernorm": (D,)}
    state = {f"model.layers.{i}.{n}.weight": torch.zeros(s) for i in range(2) for n, s in names.items()}
    state["model.embed_tokens.weight"] = torch.zeros(100, D)
    save_file(state, str(tmp_path / "model.safetensors"))
    one_layer = [(I, D), (D, 2 * I), (D, Hq + 2 * Hk), (Hq, D)]  # down, gate+up, q+k+v, o (K, N)
    assert products(tmp_path) == one_layer * 2


def test_fresh_contents_are_new_and_keep_the_questions():
    job = jobs.TextJob(("a text", "a text"), ({"id": "q"},))
    a, b = jobs.fresh(job, "r1"), jobs.fresh(job, "r2")
    assert len(set(a.texts) | set(b.texts)) == 4 and a.queries == job.queries
    assert all(text.endswith("a text") for text in a.texts)


def test_every_gpu_study_takes_its_tokenizer_from_a_folder():
    """The device has no packaged model: a study that loads a tokenizer by a packaged name fails there."""
    named = re.compile(r"load_tokenizer\(\s*[\"'](gemma3-270m|smollm2-135m)|tokenizer_folder\(\s*[\"']")
    offenders = [p.name for p in STUDIES.glob("gpu_*.py") if named.search(p.read_text())]
    offenders += ["perf_round.py"] if named.search((STUDIES / "perf_round.py").read_text()) else []
    assert not offenders, f"these studies load a packaged tokenizer by name (take --tokenizer DIR): {offenders}"
    for study in ("perf_round", "gpu_long_content", "gpu_decider", "gpu_served_ab", "gpu_served"):
        assert '"--tokenizer"' in (STUDIES / f"{study}.py").read_text(), f"{study} takes no --tokenizer DIR"


@pytest.mark.slow
def test_the_round_runs_on_tiny_models(tmp_path, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    code = perf_round.main(["--tokenizer", str(_tokenizer(tmp_path)), "--smoke", "--models", "8b", "--reps", "1",
                            "--work", str(tmp_path / "work")])
    assert code == 0
    results = json.loads((tmp_path / "out" / "perf_round.json").read_text())
    assert set(results[0]["patterns"]) == {"one", "4x6", "24x1"}
    assert all(p["questions_per_s"] > 0 for p in results[0]["patterns"].values())
    assert "| 8b |" in (tmp_path / "out" / "perf_round.md").read_text()


def _tokenizer(tmp_path: Path) -> Path:
    from benchmarks.harness import models

    return models.tokenizer_folder("smollm2-135m", tmp_path / "tok")
