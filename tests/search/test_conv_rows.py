"""The mtia row-tiled convolution rewrite (templates/conv/rows.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.templates.conv.rows import MARKER, VARIANTS, conv_mutations, rewrite

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv{d}d(in_channels, out_channels, kernel_size, padding={pad}{extra})
        self.conv = conv.to(torch.float16)

    def forward(self, x):
        w, b = self.conv.weight.float(), self.conv.bias.float()
        c = self.conv
        return F.conv{d}d(x.float(), w, b, padding=c.padding, stride=c.stride, dilation=c.dilation).to(x.dtype)


def get_inputs():
    return [torch.randn({shape}, dtype=torch.float16)]


def get_init_inputs():
    return [{c_in}, {c_out}, {k}]
"""


def _seed(name: str) -> str:
    return (PRODUCTION / name / "seed.py").read_text()


def test_both_convolution_seeds_get_one_move_per_variant_once() -> None:
    for name in ("conv1d_fp16", "conv2d_fp16"):
        muts = conv_mutations(_seed(name))
        assert [m.family for m in muts] == ["conv_rows"] * len(VARIANTS)
        out = muts[0].apply(_seed(name))
        assert MARKER in out and "conv_rows_kernel[grid]" in out and "dual_core=True" in out
        assert "permute(*range(2, w.dim()), 0, 1)" in out  # weights packed per tap
        assert conv_mutations(out) == []  # not rewritten twice
    assert conv_mutations(_seed("gemm_fp16_2048")) == []  # not a convolution module


def test_a_grouped_convolution_is_refused() -> None:
    src = _seed("conv2d_fp16").replace("padding=kernel_size // 2)", "padding=kernel_size // 2, groups=2)")
    with pytest.raises(MutationError, match="groups"):
        rewrite(src)
    assert conv_mutations(src) == []


@pytest.mark.parametrize(
    ("d", "shape", "c_in", "c_out", "k", "pad", "extra"),
    [
        (2, "2, 24, 9, 12", 24, 40, 3, 1, ""),
        (1, "2, 24, 70", 24, 40, 5, 2, ""),
        (2, "1, 16, 6, 6", 16, 32, 3, 0, ""),
        (2, "1, 16, 11, 13", 16, 32, 3, 1, ", stride=2"),
        (2, "1, 16, 9, 10", 16, 24, 3, 2, ", stride=(1, 2), dilation=2"),
        (1, "2, 16, 40", 16, 24, 3, 1, ", stride=2, dilation=3"),
    ],
)
def test_row_tiles_are_correct_on_the_simulator(
    tmp_path: Path, d: int, shape: str, c_in: int, c_out: int, k: int, pad: int, extra: str
) -> None:
    """Ragged channels (40 of a 64 block, 24 of 32: the launch narrows the blocks to the channels),
    ragged rows (12 of 16 columns), a 5-tap 1-D kernel, a convolution without padding (smaller
    output) and strided and dilated ones (odd sizes: the last output pixel's taps overhang) are all
    computed exactly."""
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM.format(d=d, shape=shape, c_in=c_in, c_out=c_out, k=k, pad=pad, extra=extra))
    seed = _seed(f"conv{d}d_fp16").replace("padding=kernel_size // 2)", f"padding={pad}{extra})")
    out = rewrite(seed, block_w=16)
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
