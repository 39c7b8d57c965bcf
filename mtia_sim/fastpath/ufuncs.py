"""numpy's own ufunc inner loops, found in the ufunc object and checked against numpy bit for bit,
so that the fast path's native code can call them (`encode` puts them in op records)."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

_LOOP = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _ufunc_table(fn: np.ufunc) -> tuple[int, int] | None:
    """(address of the `functions` array, of the `data` array) of a builtin ufunc, read from its
    PyUFuncObject (PyObject_HEAD, 4 ints, functions, data, ntypes, reserved, name); None when the
    layout does not check out (ntypes and name must match)."""
    base = id(fn)
    try:
        ntypes = ctypes.c_int.from_address(base + 48).value
        name = ctypes.c_char_p.from_address(base + 56).value
    except (ValueError, OSError):  # pragma: no cover
        return None
    if ntypes != fn.ntypes or name != fn.__name__.encode():
        return None
    functions = ctypes.c_void_p.from_address(base + 32).value
    data = ctypes.c_void_p.from_address(base + 40).value
    if not functions:
        return None
    return functions, data or 0


# ufuncs whose loops never raise (under np.errstate(all="ignore")); np.power is left out: it raises
# for negative integer exponents, a data-dependent error the command must report
SAFE_UFUNCS = frozenset({
    np.add, np.subtract, np.multiply, np.true_divide, np.minimum, np.maximum, np.fmin, np.fmax,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.negative, np.absolute, np.invert, np.exp, np.exp2,
    np.log, np.log2, np.sqrt, np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh,
    np.tanh, np.floor, np.ceil, np.rint, np.trunc, np.log1p, np.expm1, np.arctan2,
})


@functools.cache
def ufunc_loop(fn: np.ufunc, sig: str) -> tuple[int, int] | None:
    """(inner loop, its data) numpy runs for `fn` with type signature `sig` (e.g. 'ff->f'), if
    calling it directly gives numpy's bits on test data (NaN payloads, infinities, subnormals,
    contiguous and broadcast operands); else None."""
    if fn not in SAFE_UFUNCS:
        return None
    table = _ufunc_table(fn)
    if table is None or sig not in fn.types:
        return None
    i = fn.types.index(sig)
    loop = ctypes.c_void_p.from_address(table[0] + 8 * i).value
    data = ctypes.c_void_p.from_address(table[1] + 8 * i).value if table[1] else 0
    if not loop:
        return None
    dt = np.dtype(sig[0])
    if any(np.dtype(c) != dt for c in sig.replace("->", "")):
        return None
    rng = np.random.default_rng(7)
    n = 10007
    ins = [rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt) for _ in range(fn.nin)]
    if dt.kind == "f":  # every pair of specials, then random bit patterns (NaN payloads included)
        sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, np.finfo(dt).smallest_subnormal], dt)
        ins[0][:64] = np.tile(sp, 8)
        if fn.nin == 2:
            ins[1][:64] = np.repeat(sp, 8)
    for scalar in (False, True):
        args = list(ins)
        if scalar and fn.nin == 2:
            args[1] = np.asarray(ins[1][3])
        elif scalar:
            continue
        want = np.empty(n, dt)
        got = np.empty(n, dt)
        with np.errstate(all="ignore"):
            try:
                fn(*args, out=want)
            except (ValueError, TypeError, ArithmeticError):
                return None
            ptrs = (ctypes.c_void_p * 3)(*[a.ctypes.data for a in args], got.ctypes.data)
            dims = (ctypes.c_int64 * 1)(n)
            steps = (ctypes.c_int64 * 3)(*[0 if a.ndim == 0 else dt.itemsize for a in args], dt.itemsize)
            _LOOP(loop)(ctypes.addressof(ptrs), ctypes.addressof(dims), ctypes.addressof(steps), data or None)
        if want.tobytes() != got.tobytes():
            return None
    return loop, data or 0
