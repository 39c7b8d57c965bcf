"""Top-k routing drafted as kegen's one-pass template, recognised by what the reference computes:
per row of its one input's last dim, the k largest values (of the input, or of its softmax),
optionally renormalised to sum to one (`softmax -> topk -> / sum`, or Mixtral's `topk -> softmax` of
the k logits, the same numbers), returned alone, with their positions, or positions alone.

The reference runs once at its own inputs (a forward whose source names topk, a model without
parameters, one floating input of at most MAX_ELEMENTS, 2 to MAX_COLUMNS columns, k <= MAX_K; rows
wider than MAX_EXPERTS, a vocabulary's logits, are read in chunks, k <= MAX_K_CHUNKED) and
each reading is compared with its output: values to fp32 rounding, positions exactly. Positions are
drafted for float32 inputs only: among equal values torch's order is its implementation's (not the
first position), and fp16/bf16 logits tie often enough that an exact comparison of positions would
fail a correct kernel; values alone are drafted for every float dtype.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kegen.search.operators.drafting.graph import run_reference
from kegen.search.operators.templates import pow2_block
from kegen.search.operators.templates import router as templates_router

MAX_ELEMENTS = 1 << 24
MAX_EXPERTS = 1024  # the widest row one pass holds in registers; wider (a vocabulary) read in chunks
MAX_COLUMNS = 1 << 20
MAX_K = 16  # one pass unrolls its k rounds
MAX_K_CHUNKED = 64  # the chunked kernel loops over them (sampling's top 40-50 of a vocabulary)
SUMMARY = "top-k routing (softmax, top-k and renormalisation, confirmed numerically)"


def draft_router(problem_path: Path) -> str | None:
    """The template's candidate for the problem, or None (module doc)."""
    run = run_reference(problem_path, ("topk",), 1, MAX_ELEMENTS)
    if run is None or any(True for _ in run.model.parameters()) or any(True for _ in run.model.buffers()):
        return None
    (x,), ref = run.inputs, run.output
    if not x.is_floating_point() or x.dim() < 1 or not 2 <= x.shape[-1] <= MAX_COLUMNS:
        return None
    chunked = x.shape[-1] > MAX_EXPERTS
    outputs = _roles(ref, x)
    if outputs is None:
        return None
    names, values, indices = outputs
    if indices is not None and x.dtype != torch.float32:
        return None
    k = (values if values is not None else indices).shape[-1]
    if not 1 <= k <= min(MAX_K_CHUNKED if chunked else MAX_K, x.shape[-1] - 1):
        return None
    mode = _mode(x, k, values, indices)
    if mode is None or (indices is not None and not _orders_as_fp32(run.model, x, k, names, mode)):
        return None
    e_block = templates_router.CHUNK if chunked else pow2_block(x.shape[-1])
    rows = pow2_block(x.numel() // x.shape[-1] // 64, 1, max(1, 8192 // e_block))  # ~64 programs
    return templates_router.topk_router(run.names[0], k, mode[0], mode[1], names, rows, chunked)


def _roles(ref: Any, x: torch.Tensor) -> tuple[list[str], Any, Any] | None:
    """(what forward returns, in order; the values tensor; the positions tensor) of the output."""
    parts = list(ref) if isinstance(ref, tuple | list) else [ref]
    if not 1 <= len(parts) <= 2 or not all(isinstance(p, torch.Tensor) for p in parts):
        return None
    names: list[str] = []
    values = indices = None
    for p in parts:
        if p.shape[:-1] != x.shape[:-1] or p.dim() != x.dim():
            return None
        if p.dtype == torch.int64 and indices is None:
            names.append("indices")
            indices = p
        elif p.dtype == x.dtype and values is None:
            names.append("values")
            values = p
        else:
            return None
    if values is not None and indices is not None and values.shape != indices.shape:
        return None
    return names, values, indices


def _orders_as_fp32(model: Any, x: torch.Tensor, k: int, names: list[str], mode: tuple[bool, bool]) -> bool:
    """Whether the reference ranks values that differ only below fp16/bf16 precision as float32 does
    (a forward that rounds the scores first would rank them as ties, in torch's order): rows of
    1 + j * 2^-20, distinct in float32, all equal in fp16 and bf16."""
    e = x.shape[-1]
    probe = (1 + torch.arange(e, dtype=torch.float32) * 2.0**-20).expand(x.shape).contiguous()
    with torch.no_grad():
        out = model(probe)
    parts = list(out) if isinstance(out, tuple | list) else [out]
    got = parts[names.index("indices")]
    want = torch.topk(torch.softmax(probe, -1) if mode[0] else probe, k, dim=-1).indices
    return isinstance(got, torch.Tensor) and torch.equal(got, want)


def _mode(x: torch.Tensor, k: int, values: Any, indices: Any) -> tuple[bool, bool] | None:
    """(softmax first, renormalised) that reproduces the output, else None."""
    xf = x.float()
    tol = 1e-5 if x.dtype == torch.float32 else 2e-3
    for softmax in (False, True):
        p = torch.softmax(xf, dim=-1) if softmax else xf
        tv, ti = torch.topk(p, k, dim=-1)
        if indices is not None and not torch.equal(ti, indices):
            continue
        for renorm in (False, True):
            v = tv / tv.sum(dim=-1, keepdim=True) if renorm else tv
            if values is None or torch.allclose(v.to(x.dtype).float(), values.float(), rtol=tol, atol=tol):
                return softmax, renorm
    return None
