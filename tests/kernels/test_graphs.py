"""What of `backend.graphs` runs without a GPU: launch shapes, the all-padding warm-up launch, and the refusals.
(Capture and replay run on the GPU, in the acceptance run and benchmarks/gpu_served.py.)"""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import graphs, reference
from spinfc.backend.kernels import tree_attention


def test_padding_launch_has_its_shape_and_only_self_attention():
    shape = graphs.LaunchShape(128, 8, 16)
    launch = graphs.padding_launch(shape, "cpu")
    assert graphs.LaunchShape.of(launch) == shape
    q = torch.randn(128, 2, 16)
    v = torch.randn(128, 1, 16)
    out = tree_attention.tree_attention(q, v, v, launch.ends, launch.positions, scale=0.25, window=None)
    torch.testing.assert_close(out, v.expand(128, 2, 16))


class _CpuModel:
    ops = reference
    device = torch.device("cpu")

    def forward(self, launch):
        raise AssertionError("not called")


def test_refuses_a_model_off_the_gpu():
    with pytest.raises(ValueError, match="CUDA device"):
        graphs.GraphedModel(_CpuModel(), [graphs.LaunchShape(128, 8, 16)])
