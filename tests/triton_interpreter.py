"""What Triton's interpreter (TRITON_INTERPRET=1) of the installed release can run, for tests that
check GPU kernels on CPU."""

from __future__ import annotations

import pytest
import triton

TRITON = tuple(int(p) for p in triton.__version__.split(".")[:2])

# Triton 3.6's interpreter cannot use `tl.cdiv` of two ints as a `range` bound (TypeError: only
# 0-dimensional arrays can be converted to Python scalars), which Inductor's GEMM templates and
# kegen's GPU rewrites do; the kernels are fine on GPUs, and Triton 3.7's interpreter runs them.
runs_gpu_templates = pytest.mark.skipif(
    TRITON < (3, 7),
    reason="Triton 3.6's interpreter cannot run GPU GEMM templates (tl.cdiv as a range bound); GPUs can",
)
