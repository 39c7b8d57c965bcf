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
