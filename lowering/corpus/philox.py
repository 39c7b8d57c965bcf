"""A NumPy model of Triton's ``tl.rand`` (Philox 4x32-10, as in ``triton/language/random.py``), so
kernels that draw random numbers have an exact PyTorch/NumPy reference."""

from __future__ import annotations

import numpy as np

__all__ = ["philox_randint", "philox_rand"]

_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_MASK = 0xFFFFFFFF


def _umulhi(a: int, b: np.ndarray) -> np.ndarray:
    return ((np.uint64(a) * b.astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


def philox_randint(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> np.ndarray:
    """``tl.randint(seed, offsets)`` for 32-bit offsets: uint32 values, one per offset."""
    seed64 = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = seed64 & _MASK, (seed64 >> 32) & _MASK
    c0 = np.asarray(offsets).astype(np.int64).astype(np.uint32)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    for _ in range(n_rounds):
        _c0, _c2 = c0, c2
        c0 = _umulhi(_ROUND_B, _c2) ^ c1 ^ np.uint32(k0)
        c2 = _umulhi(_ROUND_A, _c0) ^ c3 ^ np.uint32(k1)
        c1 = ((np.uint64(_ROUND_B) * _c2.astype(np.uint64)) & np.uint64(_MASK)).astype(np.uint32)
        c3 = ((np.uint64(_ROUND_A) * _c0.astype(np.uint64)) & np.uint64(_MASK)).astype(np.uint32)
        k0 = (k0 + _KEY_A) & _MASK
        k1 = (k1 + _KEY_B) & _MASK
    return c0


def philox_rand(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> np.ndarray:
    """``tl.rand(seed, offsets)``: float32 uniform in [0, 1), bit-exact with Triton."""
    x = philox_randint(seed, offsets, n_rounds).view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x).astype(np.int32)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)
