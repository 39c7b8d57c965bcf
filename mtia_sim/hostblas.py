"""Keep numpy's BLAS single-threaded while the simulator runs.

The dot-product engine multiplies tiles of at most a few hundred rows with numpy. OpenBLAS splits
even those over every host core, and on a busy machine the threads' hand-offs cost ~10x the
arithmetic (128x64x128 fp32: 600 us with 2 threads on a loaded 2-core host, 50 us with one). One
thread is also the same summation everywhere, so results do not depend on the host's core count.
Only numpy's own OpenBLAS is touched (torch has its own BLAS). An explicit OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS or KEGEN_SIM_BLAS_THREADS in the environment wins.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Any


def _openblas_function(suffix: str) -> Any:
    """`<prefix>openblas_<suffix>` of the OpenBLAS numpy loaded, or None."""
    import numpy  # noqa: F401 - loads numpy's BLAS so that it can be found

    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_", ""):
            for tail in ("64_", ""):
                fn = getattr(lib, f"{prefix}openblas_{suffix}{tail}", None)
                if fn is not None:
                    return fn
    return None


def blas_threads() -> int | None:
    """Threads numpy's OpenBLAS uses now (None: no OpenBLAS found)."""
    fn = _openblas_function("get_num_threads")
    return None if fn is None else int(fn())


def _loaded_openblas() -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:  # not Linux: leave BLAS alone
        return []
    return sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()
                   and line.split()[-1].startswith("/")})


@functools.cache
def limit_blas_threads() -> int | None:
    """Set numpy's OpenBLAS to KEGEN_SIM_BLAS_THREADS (default 1) threads once per process; returns
    the count set, or None when the environment already chose one or no OpenBLAS is loaded."""
    if any(os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        return None
    raw = os.environ.get("KEGEN_SIM_BLAS_THREADS", "1")
    threads = max(int(raw) if raw.isdigit() else 1, 1)
    fn = _openblas_function("set_num_threads")
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int]
    fn(threads)
    return threads
