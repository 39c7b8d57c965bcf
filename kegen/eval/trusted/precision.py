"""The precision trial: inputs moved to large magnitudes, where reduced-precision arithmetic shows.

An fp16/bf16 computation behind a float32 output can pass float32 tolerances on unit-scale random
inputs. Offsetting every floating-point input by +PRECISION_OFFSET makes the values (and any
reduction over them) large: fp16 has a spacing of 2^-6 at 16 and bf16 of 2^-3, both far above the
float32 tolerance (atol 1e-4 + rtol 1e-4 * |reference|), while float32 arithmetic stays well
inside it. See the tolerance policy in kegen/eval/README.md.
"""

from __future__ import annotations

from typing import Any

import torch

PRECISION_OFFSET = 16.0


def offset_inputs(inputs: list[Any]) -> list[Any] | None:
    """`inputs` with every float32/float64 tensor offset by PRECISION_OFFSET; None if there is none."""
    out: list[Any] = []
    touched = False
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.float64):
            out.append(x + PRECISION_OFFSET)
            touched = True
        else:
            out.append(x)
    return out if touched else None


_LOW_PRECISION = (("float16", torch.float16), ("bfloat16", torch.bfloat16))


def check_precision(ref_out: list[torch.Tensor], cand_out: list[torch.Tensor]) -> str | None:
    """A float32 result whose values are all exactly fp16/bf16 numbers was computed in lower precision."""
    for i, (r, c) in enumerate(zip(ref_out, cand_out, strict=False)):
        if (
            r.dtype not in (torch.float32, torch.float64)
            or c.dtype != r.dtype
            or r.shape != c.shape
            or r.numel() < 64
        ):
            continue
        c_cpu, r_cpu = c.detach().cpu().reshape(-1), r.detach().cpu().reshape(-1)
        for name, low in _LOW_PRECISION:
            # the candidate's fraction first, stopping once it cannot exceed 0.999 (honest outputs)
            cand_frac, total = _representable_fraction(c_cpu, r_cpu, low, stop_below=0.999)
            if total < 64 or cand_frac <= 0.999:
                continue
            ref_frac, _ = _representable_fraction(r_cpu, r_cpu, low)
            if ref_frac < 0.5:
                return (
                    f"output {i} is float32 but every value is a {name} number (the reference's are not): "
                    "the candidate lowered the precision silently"
                )
    return None


_CHUNK = 1 << 20


def _judged(r: torch.Tensor) -> torch.Tensor:
    """Elements the precision check looks at: finite, nonzero reference values."""
    r = r.float()
    return torch.isfinite(r) & (r != 0)


def _representable_fraction(
    x: torch.Tensor, r: torch.Tensor, low: torch.dtype, stop_below: float | None = None
) -> tuple[float, int]:
    """(fraction of x's judged elements (by `r`) exactly representable in `low`, their count), in
    chunks. With `stop_below`, stops early with a fraction <= it once the whole fraction must be
    <= it (misses already >= (1 - stop_below) x every element); the count is then partial."""
    misses = total = 0
    for lo in range(0, x.numel(), _CHUNK):
        xs = x[lo : lo + _CHUNK].float()[_judged(r[lo : lo + _CHUNK])]
        total += xs.numel()
        misses += int((xs.to(low).float() != xs).sum())
        if stop_below is not None and misses >= (1 - stop_below) * x.numel():
            return min(stop_below, 1 - misses / max(total, 1)), total
    return (1 - misses / total if total else 1.0), total
