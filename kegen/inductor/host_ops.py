"""Device forms of ops Inductor leaves to a library call on the host.

`aten._embedding_bag` (1-D indices with offsets) is written as ops Inductor generates Triton for: a
bag-membership mask built elementwise from the offsets, then one matmul of the mask with the gathered
rows (`mask @ weight[indices]`), divided by the bag sizes for mode="mean"; mode="max" is a masked max
over the gathered rows (B x N x D); per-sample weights scale the rows; padding_idx rows leave the mask.
The mask is B x N, so this form suits the batch sizes a drafted problem or a tuned model serves on the
device; the kernels it yields are a seed the search improves.
"""

from __future__ import annotations

from typing import Any

MODE_SUM, MODE_MEAN, MODE_MAX = 0, 1, 2


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
    """aten._embedding_bag without data-dependent shapes (sum, mean or max; per-sample weights with
    sum; padding_idx rows left out); NotImplemented for 2-D indices (Inductor keeps the op then)."""
    import torch

    if mode not in (MODE_SUM, MODE_MEAN, MODE_MAX) or (per_sample_weights is not None and mode != MODE_SUM):
        return NotImplemented
    if indices.dim() != 1 or offsets.dim() != 1:
        return NotImplemented
    n = indices.shape[0]
    starts = offsets[:-1] if include_last_offset else offsets
    total = offsets.new_full((1,), n)
    ends = offsets[1:] if include_last_offset else torch.cat([offsets[1:], total])
    pos = torch.arange(n, device=indices.device, dtype=offsets.dtype)
    member = (pos[None, :] >= starts[:, None]) & (pos[None, :] < ends[:, None])  # (bags, n)
    padded = padding_idx is not None and padding_idx >= 0
    if padded:  # torch leaves the padding rows out of every bag (and out of a mean's count)
        member = member & (indices != padding_idx)[None, :]
    rows = weight[indices]  # (n, dim) gather
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.to(weight.dtype)[:, None]
    sizes = member.sum(dim=1) if padded else ends - starts
    if mode == MODE_MAX:  # an empty bag gives 0, as torch's
        scores = torch.where(member[:, :, None], rows[None, :, :], float("-inf"))
        out = torch.where(sizes[:, None] > 0, scores.amax(dim=1), 0.0).to(weight.dtype)
    else:
        out = member.to(weight.dtype) @ rows
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
