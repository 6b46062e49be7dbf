"""A mixture of experts' expert products, shared by the families that have one (Gemma 4's MoE block, Qwen3.5-MoE's
sparse block): given each row's chosen experts and their weights, the weighted sum of the experts' gated MLPs.

The experts run two ways with the same arithmetic per row: on the CPU, each expert on the rows routed to it
(transformers' loop); on CUDA, each expert on every row with a zero weight where it was not chosen, so that every
product has the pass's fixed row count (no host synchronisation, capturable in a CUDA graph, and a row's bits do
not depend on how many other rows chose the same expert). That costs num_experts / top_k times the experts' FLOPs
of a sparse dispatch: correct and batch-invariant first; a grouped GEMM is the next step.
"""

from __future__ import annotations

import torch


def choose(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """scores: [T, E] a router's logits -> (weights [T, K] float32, indices [T, K]): the softmax over the experts,
    its top k, renormalised over the chosen (transformers' Gemma 4 and Qwen3.5-MoE routers)."""
    weights, index = torch.topk(torch.softmax(scores.float(), dim=-1), k=k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), index


def weighted_sum(model, gate_up: torch.Tensor, down: torch.Tensor, x: torch.Tensor, weights: torch.Tensor,
                 index: torch.Tensor, act: str) -> torch.Tensor:
    """x: [T, D], gate_up: [E, 2 I, D], down: [E, D, I], weights / index: [T, K] (each row's chosen experts) ->
    sum over a row's experts of weight * down(act(gate(x)) * up(x)): [T, D] float32."""
    experts = _dense if x.is_cuda else _routed
    return experts(model, gate_up, down, x, weights, index, act)


def _expert(model, gate_up, down, e: int, x: torch.Tensor, act: str) -> torch.Tensor:
    """x: [M, D] -> expert e's output [M, D]: down(act(gate(x)) * up(x))."""
    gate, up = model.linear(x, gate_up[e]).chunk(2, dim=-1)
    return model.linear(model.ops.gated_act(gate, up, act), down[e])


def _routed(model, gate_up, down, x, weights, index, act) -> torch.Tensor:
    """Each expert on the rows that chose it, weighted and added per row in expert order."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in torch.unique(index).tolist():
        rows, slot = torch.where(index == e)
        contribution = _expert(model, gate_up, down, e, x[rows], act).float() * weights[rows, slot, None]
        out.index_add_(0, rows, contribution)
    return out


def _dense(model, gate_up, down, x, weights, index, act) -> torch.Tensor:
    """Each expert on every row, weighted by its routing weight (0 where not chosen), added in expert order: the
    same sum per row as `_routed` at a fixed row count."""
    T, E = x.shape[0], gate_up.shape[0]
    dense = torch.zeros((T, E), dtype=torch.float32, device=x.device).scatter_(1, index, weights)  # [T, E]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(E):
        out += _expert(model, gate_up, down, e, x, act).float() * dense[:, e:e + 1]
    return out
