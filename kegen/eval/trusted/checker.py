"""Correctness: compare a candidate's outputs with the reference's under dtype-dependent tolerances."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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
    rf, cf = r.detach().cpu().reshape(-1), c.detach().cpu().reshape(-1)
    scan = _FloatScan()
    for lo in range(0, rf.numel(), CHUNK):  # in chunks: no float64 temporaries of the outputs' size
        flat = scan.add(lo, rf[lo : lo + CHUNK], cf[lo : lo + CHUNK], atol, rtol)
        if flat is not None:
            idx = _unravel(flat, r.shape)
            return Comparison(
                False,
                f"{label}: NaN/Inf disagree at index {tuple(idx)}: candidate "
                f"{cf[flat].double().item()}, reference {rf[flat].double().item()}",
                float("inf"),
                float("inf"),
                idx,
            )
    ok = scan.max_excess <= 0
    worst_flat = scan.abs_at if ok else scan.excess_at
    idx = _unravel(worst_flat, r.shape)
    msg = (
        ""
        if ok
        else (
            f"{label} differs at index {tuple(idx)}: candidate {cf[worst_flat].double().item():.6g}, "
            "reference "
            f"{rf[worst_flat].double().item():.6g} (atol {atol:g}, rtol {rtol:g}); "
            f"{scan.out_of_tolerance} of {r.numel()} elements out of tolerance"
        )
    )
    return Comparison(ok, msg, scan.max_abs, scan.max_rel, idx)


CHUNK = 1 << 20  # elements compared at a time


class _FloatScan:
    """Running worst errors over chunks of a float comparison (first index wins ties, as argmax)."""

    def __init__(self) -> None:
        self.max_excess, self.excess_at = -math.inf, 0
        self.max_abs, self.abs_at = -math.inf, 0
        self.max_rel = -math.inf
        self.out_of_tolerance = 0

    def add(self, lo: int, r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float) -> int | None:
        """Fold in elements [lo, lo + len) (any float dtype: isfinite does not depend on the width;
        the arithmetic is float64); the flat index of the first NaN/Inf disagreement, if any."""
        if _bits_equal(r, c):  # diff 0, rel 0, nothing out of tolerance, no NaN/Inf disagreement
            if self.max_abs < 0:
                self.max_abs, self.abs_at, self.max_rel = 0.0, lo, max(self.max_rel, 0.0)
            return None
        if bool(torch.isfinite(r).all()) and bool(torch.isfinite(c).all()):
            scratch = (r.to(torch.float64, copy=True), c.to(torch.float64, copy=True))
            self._add_finite(lo, *scratch, atol, rtol)  # the common case: fewer passes
            return None
        r64, c64 = r.double(), c.double()
        r_nan, c_nan = torch.isnan(r64), torch.isnan(c64)
        r_inf, c_inf = torch.isinf(r64), torch.isinf(c64)
        special = (r_nan != c_nan) | (r_inf != c_inf) | (r_inf & c_inf & (torch.sign(r64) != torch.sign(c64)))
        if bool(special.any()):
            return lo + int(special.nonzero()[0])
        finite = torch.isfinite(r64)
        diff = torch.where(finite, (c64 - r64).abs(), torch.zeros_like(r64))
        excess = torch.where(finite, diff - (atol + rtol * r64.abs()), torch.full_like(r64, -math.inf))
        rel = torch.where(
            finite, diff / r64.abs().clamp_min(atol if atol > 0 else 1e-12), torch.zeros_like(r64)
        )
        self._fold(lo, diff, excess, rel)
        return None

    def _add_finite(self, lo: int, r64: torch.Tensor, c64: torch.Tensor, atol: float, rtol: float) -> None:
        """Everything finite: the same quantities as `add`, computed in place (r64, c64 are scratch)."""
        diff = c64.sub_(r64).abs_()
        mag = r64.abs_()
        excess = diff - (mag * rtol).add_(atol)  # same operations, same order as `add`
        rel = diff / mag.clamp_min_(atol if atol > 0 else 1e-12)
        self._fold(lo, diff, excess, rel)

    def _fold(self, lo: int, diff: torch.Tensor, excess: torch.Tensor, rel: torch.Tensor) -> None:
        at = int(excess.argmax())
        if float(excess[at]) > self.max_excess:
            self.max_excess, self.excess_at = float(excess[at]), lo + at
        at = int(diff.argmax())
        if float(diff[at]) > self.max_abs:
            self.max_abs, self.abs_at = float(diff[at]), lo + at
        self.max_rel = max(self.max_rel, float(rel.max()))
        self.out_of_tolerance += int((excess > 0).sum())


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits_equal(r: torch.Tensor, c: torch.Tensor) -> bool:
    bits = _BITS.get(r.element_size())
    return (
        bits is not None
        and r.is_contiguous()
        and c.is_contiguous()
        and torch.equal(r.view(bits), c.view(bits))
    )


FEW_THREADS = 2  # one_thread() acts only where torch runs this many intra-op threads or fewer
_threads_lock = threading.Lock()
_threads_users = 0
_threads_before = 0


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with one intra-op torch thread where torch has only two (a 2-core machine): the
    checks' chunked operations gain at most 2x from the second thread, and its spin-waits cost a
    loaded machine several times the CPU. With more threads (a big host) nothing changes. Nested and
    concurrent blocks (evaluations on several threads) restore the count once, after the last one."""
    global _threads_users, _threads_before
    with _threads_lock:
        if _threads_users == 0:
            _threads_before = torch.get_num_threads()
            if _threads_before <= FEW_THREADS:
                torch.set_num_threads(1)
        _threads_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_before)


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
