"""Device forms of ops Inductor leaves to a library call on the host.

`aten._embedding_bag` (sum/mean, 1-D indices with offsets, no per-sample weights) is written as ops
Inductor generates Triton for: a bag-membership mask built elementwise from the offsets, then one
matmul of the mask with the gathered rows (`mask @ weight[indices]`), divided by the bag sizes for
mode="mean". The mask is B x N, so this form suits the batch sizes a drafted problem or a tuned
model serves on the device; the kernels it yields are a seed the search improves.
"""

from __future__ import annotations

from typing import Any

MODE_SUM, MODE_MEAN = 0, 1


def embedding_bag(
    weight: Any,
    indices: Any,
    offsets: Any,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = -1,
) -> Any:
    """aten._embedding_bag without data-dependent shapes; NotImplemented for forms it does not cover
    (mode max, per-sample weights, padding_idx, 2-D indices)."""
    import torch

    if mode not in (MODE_SUM, MODE_MEAN) or per_sample_weights is not None or (padding_idx or -1) >= 0:
        return NotImplemented
    if indices.dim() != 1 or offsets.dim() != 1:
        return NotImplemented
    n = indices.shape[0]
    starts = offsets[:-1] if include_last_offset else offsets
    total = offsets.new_full((1,), n)
    ends = offsets[1:] if include_last_offset else torch.cat([offsets[1:], total])
    pos = torch.arange(n, device=indices.device, dtype=offsets.dtype)
    member = (pos[None, :] >= starts[:, None]) & (pos[None, :] < ends[:, None])  # (bags, n)
    rows = weight[indices]  # (n, dim) gather
    out = member.to(weight.dtype) @ rows
    sizes = ends - starts
    if mode == MODE_MEAN:
        out = out / sizes.clamp(min=1).to(weight.dtype)[:, None]
    bags = starts.shape[0]
    offset2bag = torch.zeros(n, dtype=offsets.dtype, device=indices.device)
    max_indices = torch.zeros(bags, dtype=offsets.dtype, device=indices.device)
    return out, offset2bag, sizes, max_indices


def decompositions() -> dict[Any, Any]:
    """{aten op: device form} to add to the drafter's decomposition table."""
    import torch

    aten = torch.ops.aten
    ops = (aten.embedding_bag.default, aten.embedding_bag.padding_idx, aten._embedding_bag.default,
           aten._embedding_bag_forward_only.default)
    return dict.fromkeys(ops, embedding_bag)
