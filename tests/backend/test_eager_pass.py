"""A launch shape run eagerly over its static buffers (a stack that cannot be captured: Qwen3.5's recurrent layers
read the pass's question tree on the host) is handed each launch's own spans, in a Launch of its own.

On 2026-12-04 it was handed the static padding launch itself, every pass: its spans were the warm-up's and Qwen3.5
kept the tree it had read off them (keyed by the launch object), so every pass of a shape ran the warm-up pass's
chains. Served at defaults on an H200, option logprobs were 2.7 from transformers and changed with the neighbours
of a content (the acceptance run's `options` and `packed`)."""

from __future__ import annotations

import torch

from spinfc.backend.graphs import GraphedPass, LaunchShape
from spinfc.backend.launch import packed, packed_bytes


def a_launch(shape: LaunchShape, spans: tuple) -> object:
    T, R, N = shape
    launch = packed(torch.zeros(packed_bytes(T, R, N), dtype=torch.uint8), T, R, N, spans)
    launch.ends.copy_(torch.full((T,), T, dtype=torch.int32))
    return launch


def test_each_eager_pass_sees_its_own_launch_and_spans():
    shape = LaunchShape(16, 4, 4)
    seen = []

    def forward(launch):
        seen.append(launch)
        return torch.zeros(shape[2])

    graphed = GraphedPass(forward, shape, torch.device("cpu"), capture=False)
    first, second = a_launch(shape, ((0, 10),)), a_launch(shape, ((0, 4), (8, 14)))
    graphed(first)
    graphed(second)
    assert [launch.spans for launch in seen] == [((0, 10),), ((0, 4), (8, 14))]
    assert seen[0] is not seen[1]  # a model keeping state per launch object cannot carry it to the next pass
    assert torch.equal(seen[1].ends, second.ends)  # the static buffers hold the launch's arrays
