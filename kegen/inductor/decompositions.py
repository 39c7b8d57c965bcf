"""Decompositions applied before Inductor, for ops its CPU path would leave to aten on the host.

Inductor falls back to a library call for scaled-dot-product attention on CPU
(`_scaled_dot_product_flash_attention_for_cpu`), for `avg_pool3d` and for `topk`; written in ops
Inductor generates Triton for, they run on the device like the rest.
"""

from __future__ import annotations

import math
from typing import Any

import torch


def _triple(v: Any, default: Any) -> list[int]:
    if v is None or (isinstance(v, list | tuple) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, list | tuple) else [v]
    return [int(x) for x in (v * 3 if len(v) == 1 else v)]


def avg_pool3d(
    x: torch.Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> torch.Tensor:
    """aten.avg_pool3d as pad + windows (unfold) + sum / count."""
    if ceil_mode:
        return NotImplemented  # type: ignore[no-any-return]
    k = _triple(kernel_size, kernel_size)
    s = _triple(stride, k)
    p = _triple(padding, 0)
    pads = [p[2], p[2], p[1], p[1], p[0], p[0]]
    xp = torch.nn.functional.pad(x, pads)
    win = xp.unfold(-3, k[0], s[0]).unfold(-3, k[1], s[1]).unfold(-3, k[2], s[2])
    total = win.sum(dim=(-3, -2, -1))
    if divisor_override:
        return total / divisor_override
    if count_include_pad or not any(p):
        return total / (k[0] * k[1] * k[2])
    ones = torch.nn.functional.pad(torch.ones_like(x[..., :1, :, :, :].expand(x.shape)), pads)
    count = ones.unfold(-3, k[0], s[0]).unfold(-3, k[1], s[1]).unfold(-3, k[2], s[2]).sum(dim=(-3, -2, -1))
    return total / count


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Attention as matmuls and a softmax (inference: dropout must be 0)."""
    if dropout_p:
        return NotImplemented  # type: ignore[no-any-return]
    if enable_gqa and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    factor = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * factor
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s, dim=-1) @ v


MAX_TOPK = 16  # k rounds of a max reduction: routers (top-1/2 of experts), beams; larger k stays refused


def topk(
    x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten.topk for small k as k rounds of (max, first untaken position holding it): values sorted
    and equal to torch's, indices distinct, the first occurrence among ties (torch leaves the order
    of ties unspecified), also for rows with fewer than k finite values (masked logits at -inf) and
    NaNs (ranked above everything, as torch does)."""
    if k > MAX_TOPK or not x.is_floating_point() or x.dim() == 0:
        return NotImplemented  # type: ignore[return-value]
    dim = dim % x.dim()
    work = x if largest else -x
    n = x.size(dim)
    pos = torch.arange(n, device=x.device).view([-1 if d == dim else 1 for d in range(x.dim())])
    taken = torch.zeros_like(x, dtype=torch.bool)
    values, indices = [], []
    for _ in range(k):
        nan = torch.isnan(work) & ~taken
        has_nan = nan.any(dim=dim, keepdim=True)
        finite = torch.where(taken | torch.isnan(work), float("-inf"), work)
        best = torch.where(has_nan, float("nan"), finite.amax(dim=dim, keepdim=True))
        hit = ~taken & torch.where(has_nan, nan, work == best)
        at = torch.where(hit, pos, n).amin(dim=dim, keepdim=True)
        values.append(torch.gather(x, dim, at))
        indices.append(at)
        taken = taken | (pos == at)
    return torch.cat(values, dim), torch.cat(indices, dim)


def decomposition_table() -> dict[Any, Any]:
    """Ops → decompositions for `ExportedProgram.run_decompositions`."""
    from torch._decomp import decomposition_table as torch_table

    aten = torch.ops.aten
    table: dict[Any, Any] = {
        aten.avg_pool3d.default: avg_pool3d,
        aten.scaled_dot_product_attention.default: scaled_dot_product_attention,
        aten.topk.default: topk,
    }
    flash = aten._scaled_dot_product_flash_attention_for_cpu.default
    if flash in torch_table:
        table[flash] = torch_table[flash]
    from kegen.inductor.host_ops import decompositions as host_op_forms

    table.update(host_op_forms())  # e.g. aten._embedding_bag, which Inductor leaves on the host
    return table
