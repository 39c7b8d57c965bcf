"""The evaluator's own anti-cheat checks on what a candidate returned (E: trusted).

Each check returns a message (a cheat was seen) or None; E turns a message into
Status.CHEAT_DETECTED: aliases of inputs or of the reference's outputs, cached results, lowered
precision, faster than the roofline allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from kegen.eval.sandboxed.guards import check_mutation, mutated_inputs  # noqa: F401  (shared with W)
from kegen.eval.trusted.precision import check_precision  # noqa: F401  (re-exported: the checks' home)

# --- what the candidate returns ------------------------------------------------------------------


def _storage_range(t: torch.Tensor) -> tuple[str, int, int]:
    st = t.untyped_storage()
    return (str(t.device), int(st.data_ptr()), int(st.data_ptr()) + int(st.nbytes()))


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    da, a0, a1 = _storage_range(a)
    db, b0, b1 = _storage_range(b)
    return da == db and a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def check_aliasing(
    cand_out: list[torch.Tensor],
    cand_inputs: list[Any],
    ref_out: list[torch.Tensor] | None,
    ref_inputs: list[Any],
    ref_aliases: set[int],
) -> str | None:
    """The candidate's outputs must be its own memory: not an input's, not the reference's output."""
    for i, out in enumerate(cand_out):
        if ref_out is not None:
            for r in ref_out:
                if overlaps(out, r):
                    return (
                        f"candidate output {i} is the reference's output buffer "
                        "(returned memory it did not compute)"
                    )
        for r in ref_inputs:
            if isinstance(r, torch.Tensor) and overlaps(out, r):
                return f"candidate output {i} aliases the reference's input buffer"
        for j, x in enumerate(cand_inputs):
            if isinstance(x, torch.Tensor) and overlaps(out, x) and j not in ref_aliases:
                return f"candidate output {i} aliases input {j} (the reference returns new memory)"
    return None


def reference_aliases(ref_out: list[torch.Tensor], ref_inputs: list[Any]) -> set[int]:
    """Inputs the reference itself returns views of (those aliases are legitimate)."""
    return {
        j
        for j, x in enumerate(ref_inputs)
        if isinstance(x, torch.Tensor) and any(overlaps(o, x) for o in ref_out)
    }


_Out = TypeVar("_Out")  # output tensors, or digests of them


def check_cached(
    prev: list[tuple[list[_Out], list[_Out]]],
    ref_out: list[_Out],
    cand_out: list[_Out],
    same: Callable[[list[_Out], list[_Out]], bool],
) -> str | None:
    """Outputs identical to an earlier call's while the reference's differ: a cached result."""
    for prev_ref, prev_cand in prev:
        if same(prev_cand, cand_out) and not same(prev_ref, ref_out):
            return (
                "candidate returned the same output for different inputs (a cached result; "
                "the reference's outputs differ)"
            )
    return None


def check_roofline(candidate_time_s: float | None, roofline_time_s: float | None, slack: float) -> str | None:
    """Faster than the machine's physical limit (minus `slack`) means the work was not done."""
    if not candidate_time_s or not roofline_time_s:
        return None
    if candidate_time_s < roofline_time_s * slack:
        return (
            f"candidate time {candidate_time_s:.3g} s is below the roofline {roofline_time_s:.3g} s "
            f"({roofline_time_s / candidate_time_s:.1f}x faster than the hardware can move the data "
            "or do the FLOPs): the work was not done"
        )
    return None


def median_fraction(pairs: list[tuple[float, float]]) -> float:
    """The median over timed samples of roofline time / sample time ((sample, roofline) pairs; on mtia
    each sample's roofline is its own inputs', docs/DECISIONS.md D47)."""
    ratios = sorted(bound / sample for sample, bound in pairs if sample > 0)
    return ratios[(len(ratios) - 1) // 2] if ratios else 0.0


def check_roofline_samples(pairs: list[tuple[float, float]], slack: float) -> str | None:
    """`check_roofline` on every (sample, roofline) pair: the first message, else None."""
    for sample, bound in pairs:
        msg = check_roofline(sample, bound, slack)
        if msg:
            return msg
    return None
