"""The precision trial: inputs moved to large magnitudes, where reduced-precision arithmetic shows.

An fp16/bf16 computation behind a float32 output can pass float32 tolerances on unit-scale random
inputs. Offsetting every floating-point input by +PRECISION_OFFSET makes the values (and any
reduction over them) large: fp16 has a spacing of 2^-6 at 16 and bf16 of 2^-3, both far above the
float32 tolerance (atol 1e-4 + rtol 1e-4 * |reference|), while float32 arithmetic stays well
inside it. See the tolerance policy in kegen/eval/README.md.

Some references are ill-conditioned there: a softmax over attention scores of ~3000 (fp32 spacing
2.4e-4) moves every exponential by ~1e-4 relative under any reordering, so an exact float32 kernel
(and Inductor's own) failed the trial. Where a candidate fails it, `conditioned_comparison` measures
the reference's own float32 error against a float64 run of it at the same inputs and judges again
with that error (x CONDITION_SLACK) added to atol: fp16/bf16 arithmetic still fails by orders of
magnitude, a float32 computation in another order passes.
"""

from __future__ import annotations

from typing import Any

import torch

PRECISION_OFFSET = 16.0
CONDITION_SLACK = 4.0  # a reordered float32 kernel's error vs float64 is about the reference's own


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


def reference_error(ref: Any, inputs: list[Any], ref_out: list[torch.Tensor], gpu: bool) -> float | None:
    """The largest |float32 reference - float64 reference| over the float32 outputs at `inputs`
    (the reference and its float32 inputs run in float64); None where that run fails or is not finite."""
    import copy

    from kegen.eval.models import call_reference

    try:
        ref64 = copy.deepcopy(ref).double()
        ins = [x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in inputs]
        out64 = call_reference(ref64, ins, gpu)
    except Exception:  # an op without float64 support, a dtype the forward fixes: no slack
        return None
    errs = [
        float((a.double() - b.double()).abs().max())
        for a, b in zip(ref_out, out64, strict=False)
        if a.dtype == torch.float32 and a.shape == b.shape and a.numel()
    ]
    return max(errs) if errs and all(e == e and e != float("inf") for e in errs) else None


def conditioned_comparison(
    ref: Any,
    inputs: list[Any],
    ref_out: list[torch.Tensor],
    cand_out: list[torch.Tensor],
    strict: Any,
    gpu: bool,
) -> Any:
    """The precision trial judged again with the reference's own float32 error (module doc) allowed:
    a passing Comparison, or None (no slack measurable, still failing, or values exactly fp16/bf16)."""
    from dataclasses import replace

    from kegen.eval.config import DEFAULT_TOLERANCES
    from kegen.eval.trusted.checker import compare_outputs

    err = reference_error(ref, inputs, ref_out, gpu)
    if not err:
        return None
    atol = strict.atol if strict.atol is not None else DEFAULT_TOLERANCES["float32"][0]
    rtol = strict.rtol if strict.rtol is not None else DEFAULT_TOLERANCES["float32"][1]
    cmp = compare_outputs(ref_out, cand_out, replace(strict, atol=atol + CONDITION_SLACK * err, rtol=rtol))
    return cmp if cmp.ok and check_precision(ref_out, cand_out) is None else None
