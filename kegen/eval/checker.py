"""Correctness: compare a candidate's outputs with the reference's under dtype-dependent tolerances."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kegen.eval.config import EvalConfig


@dataclass
class Comparison:
    """The outcome of comparing one trial's outputs."""

    ok: bool
    message: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    worst_index: list[int] | None = None
    worst_output: int = 0


def compare_outputs(ref: list[torch.Tensor], cand: list[torch.Tensor], config: EvalConfig) -> Comparison:
    """Same count, shapes and dtypes; NaN/Inf at the same places; |c - r| <= atol + rtol * |r| elsewhere."""
    if len(ref) != len(cand):
        return Comparison(False, f"candidate returned {len(cand)} outputs, the reference {len(ref)}")
    worst = Comparison(True)
    for i, (r, c) in enumerate(zip(ref, cand, strict=True)):
        label = f"output {i}" if len(ref) > 1 else "output"
        if tuple(r.shape) != tuple(c.shape):
            return Comparison(False, f"{label} has shape {tuple(c.shape)}, the reference {tuple(r.shape)}")
        if r.device != c.device:
            return Comparison(False, f"{label} is on {c.device}, the reference's on {r.device}")
        if r.dtype != c.dtype:
            return Comparison(False, f"{label} has dtype {c.dtype}, the reference {r.dtype}")
        cmp = _compare_tensor(r, c, config, label)
        cmp.worst_output = i
        if not cmp.ok:
            return cmp
        if cmp.max_abs_error >= worst.max_abs_error:
            worst = cmp
    return worst


def _compare_tensor(r: torch.Tensor, c: torch.Tensor, config: EvalConfig, label: str) -> Comparison:
    if r.numel() == 0:
        return Comparison(True)
    if not (r.is_floating_point() or r.is_complex()):
        diff = (r.to(torch.int64) - c.to(torch.int64)).abs() if r.dtype != torch.bool else (r != c).long()
        max_abs = float(diff.max())
        idx = _unravel(int(diff.argmax()), r.shape)
        ok = max_abs == 0
        return Comparison(
            ok,
            ""
            if ok
            else f"{label} differs at index {tuple(idx)}: candidate "
            f"{c.flatten()[int(diff.argmax())].item()}, reference {r.flatten()[int(diff.argmax())].item()}",
            max_abs,
            max_abs,
            idx,
        )
    atol, rtol = config.tolerances(str(r.dtype).removeprefix("torch."))
    r64, c64 = r.detach().double().cpu(), c.detach().double().cpu()
    r_nan, c_nan = torch.isnan(r64), torch.isnan(c64)
    r_inf, c_inf = torch.isinf(r64), torch.isinf(c64)
    special_mismatch = (
        (r_nan != c_nan) | (r_inf != c_inf) | (r_inf & c_inf & (torch.sign(r64) != torch.sign(c64)))
    )
    if bool(special_mismatch.any()):
        flat = int(special_mismatch.flatten().nonzero()[0])
        idx = _unravel(flat, r.shape)
        return Comparison(
            False,
            f"{label}: NaN/Inf disagree at index {tuple(idx)}: candidate "
            f"{c64.flatten()[flat].item()}, reference {r64.flatten()[flat].item()}",
            float("inf"),
            float("inf"),
            idx,
        )
    finite = torch.isfinite(r64)
    diff = torch.where(finite, (c64 - r64).abs(), torch.zeros_like(r64))
    excess = torch.where(finite, diff - (atol + rtol * r64.abs()), torch.full_like(r64, -math.inf))
    flat_excess = int(excess.flatten().argmax())
    flat_abs = int(diff.flatten().argmax())
    max_abs = float(diff.flatten()[flat_abs])
    rel = torch.where(finite, diff / r64.abs().clamp_min(atol if atol > 0 else 1e-12), torch.zeros_like(r64))
    max_rel = float(rel.max())
    ok = float(excess.flatten()[flat_excess]) <= 0
    worst_flat = flat_abs if ok else flat_excess
    idx = _unravel(worst_flat, r.shape)
    msg = (
        ""
        if ok
        else (
            f"{label} differs at index {tuple(idx)}: candidate {c64.flatten()[worst_flat].item():.6g}, "
            "reference "
            f"{r64.flatten()[worst_flat].item():.6g} (atol {atol:g}, rtol {rtol:g}); "
            f"{int((excess > 0).sum())} of {r.numel()} elements out of tolerance"
        )
    )
    return Comparison(ok, msg, max_abs, max_rel, idx)


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    idx: list[int] = []
    for dim in reversed(tuple(shape)):
        idx.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return list(reversed(idx))


def same_values(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """True if two output lists are bitwise identical (NaNs compared as equal)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not torch.equal(
            x.detach().cpu().view(-1).view(torch.uint8) if x.numel() else x.cpu(),
            y.detach().cpu().view(-1).view(torch.uint8) if y.numel() else y.cpu(),
        ):
            return False
    return True
