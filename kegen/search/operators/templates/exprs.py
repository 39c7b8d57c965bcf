"""Triton expressions of single elementwise torch ops, the pieces drafting fuses into kernels.

Each is a format string over operand expressions (`{0}`, `{1}`), computed in fp32 inside a kernel;
tanh, sigmoid and GELU are written with tl.exp / tl.erf, which the MTIA backend lowers.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

GELU_ERF = "(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))"
GELU_TANH = "(0.5 * {0} * (2.0 / (1.0 + tl.exp(-1.5957691216057308 * ({0} + 0.044715 * {0} * {0} * {0})))))"
RELU, SIGMOID = "tl.maximum({0}, 0.0)", "(1.0 / (1.0 + tl.exp(-{0})))"
TANH, SILU = "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)", "({0} / (1.0 + tl.exp(-{0})))"

# fx target -> Triton expression over operand strings ({0}, {1}); scalars are inlined.
ELEMENTWISE_FORMATS: dict[Any, str] = {
    **dict.fromkeys((operator.add, torch.add, "add"), "({0} + {1})"),
    **dict.fromkeys((operator.sub, torch.sub, "sub"), "({0} - {1})"),
    **dict.fromkeys((operator.mul, torch.mul, "mul"), "({0} * {1})"),
    **dict.fromkeys((operator.truediv, torch.div, "div"), "({0} / {1})"),
    **dict.fromkeys((operator.neg, torch.neg, "neg"), "(-{0})"),
    **dict.fromkeys((torch.relu, F.relu, "relu"), RELU),
    **dict.fromkeys((torch.sigmoid, F.sigmoid, "sigmoid"), SIGMOID),
    **dict.fromkeys((torch.tanh, F.tanh, "tanh"), TANH),
    **dict.fromkeys((torch.exp, "exp"), "tl.exp({0})"),
    **dict.fromkeys((torch.log, "log"), "tl.log({0})"),
    **dict.fromkeys((torch.abs, "abs"), "tl.abs({0})"),
    **dict.fromkeys((torch.sqrt, "sqrt"), "tl.sqrt({0})"),
    **dict.fromkeys((torch.rsqrt, "rsqrt"), "(1.0 / tl.sqrt({0}))"),
    **dict.fromkeys((torch.reciprocal, "reciprocal"), "(1.0 / {0})"),
    **dict.fromkeys((torch.square, "square"), "({0} * {0})"),
    **dict.fromkeys((F.silu, "silu"), SILU),
    **dict.fromkeys(("contiguous", "clone", torch.clone, "float"), "{0}"),
    torch.maximum: "tl.maximum({0}, {1})",
    torch.minimum: "tl.minimum({0}, {1})",
}
# integer/half exponents of pow -> expression
POW_FORMATS: dict[float, str] = {
    2: "({0} * {0})",
    1: "{0}",
    0.5: "tl.sqrt({0})",
    -1: "(1.0 / {0})",
    -0.5: "(1.0 / tl.sqrt({0}))",
}
# clamps with constant bounds: fx target -> (the parameter names of the lower and upper bound, None where
# the bound is fixed or absent; the bounds' defaults)
CLAMPS: dict[Any, tuple[tuple[str | None, str | None], tuple[float | None, float | None]]] = {
    **dict.fromkeys(
        (torch.clamp, "clamp", "clamp_", torch.clip, "clip", "clip_"), (("min", "max"), (None, None))
    ),
    **dict.fromkeys((torch.clamp_min, "clamp_min", "clamp_min_"), (("min", None), (None, None))),
    **dict.fromkeys((torch.clamp_max, "clamp_max", "clamp_max_"), ((None, "max"), (None, None))),
    F.hardtanh: (("min_val", "max_val"), (-1.0, 1.0)),
    F.relu6: ((None, None), (0.0, 6.0)),
}


def clamp_expr(lo: float | None, hi: float | None) -> str:
    """The expression of a clamp to [lo, hi] (a bound of None: none on that side)."""
    expr = "{0}"
    if lo is not None:
        expr = f"tl.maximum({expr}, {float(lo)!r})"
    if hi is not None:
        expr = f"tl.minimum({expr}, {float(hi)!r})"
    return expr


# activation modules (nn.Sequential stacks) -> their expression, from the module's settings
MODULE_FORMATS: dict[type, Callable[[Any], str]] = {
    nn.ReLU: lambda m: RELU,
    nn.Sigmoid: lambda m: SIGMOID,
    nn.Tanh: lambda m: TANH,
    nn.SiLU: lambda m: SILU,
    nn.GELU: lambda m: GELU_TANH if m.approximate == "tanh" else GELU_ERF,
    nn.LeakyReLU: lambda m: f"tl.where({{0}} > 0.0, {{0}}, {{0}} * {float(m.negative_slope)!r})",
    nn.Hardtanh: lambda m: clamp_expr(m.min_val, m.max_val),
    nn.ReLU6: lambda m: clamp_expr(0.0, 6.0),
    nn.Identity: lambda m: "{0}",
    nn.Dropout: lambda m: "{0}",  # the evaluator runs the model in eval mode
}
