"""The mtia weight-stationary convolution rewrite (templates/conv/stationary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.templates.conv.rows import conv_mutations
from kegen.search.operators.templates.conv.stationary import (
    ALIGN_BYTES,
    MARKER,
    pixel_kernel,
    rewrite,
    stationary_kernel,
    stationary_mutations,
)
from mtia_sim import isa

from .test_conv_rows import PROBLEM, _seed


def test_both_convolution_seeds_get_the_move_once() -> None:
    for name in ("conv1d_fp16", "conv2d_fp16"):
        move, wide = stationary_mutations(_seed(name))
        assert wide.name == "conv_stationary=128x128/stages=1" and wide.prior < move.prior
        assert "CONVS_BLOCK_W = 128\nCONVS_PROGRAMS" in wide.apply(_seed(name)).replace(
            "CONVS_BLOCK_CO = 128\n", ""
        )
        out = move.apply(_seed(name))
        assert MARKER in out and "conv_ws_kernel[grid]" in out and "conv_rows_kernel[grid]" in out
        assert stationary_mutations(out) == [] and conv_mutations(out) == []  # not rewritten twice
        assert stationary_mutations(conv_mutations(_seed(name))[0].apply(_seed(name))) == []
    assert stationary_mutations(_seed("gemm_fp16_2048")) == []  # not a convolution module


def test_the_alignment_is_the_simulators() -> None:
    assert ALIGN_BYTES == isa.ALIGNMENT
    assert "sh = (((n * C_OUT + tl.program_id(2) * BLOCK_CO) * OH + oh) * OW) % ALIGN" in stationary_kernel()


def test_the_taps_are_unrolled_under_constexpr_guards() -> None:
    src = stationary_kernel(kh_max=2, kw_max=2)
    assert src.count("tl.dot(") == 4 and src.count("= tl.load(w_tile") == 4
    assert "    if KH > 1:\n        if KW > 1:\n            w1_1 = tl.load(" in src
    pixels = pixel_kernel(kh_max=2, kw_max=3)
    assert pixels.count("tl.dot(") == 6 and "x_img + (p + ((1 - PAD_H) * W + (2 - PAD_W)))[None, :]" in pixels


@pytest.mark.parametrize(
    ("d", "shape", "c_in", "c_out", "k", "pad", "extra", "kernel"),
    [
        (2, "2, 24, 9, 12", 24, 40, 3, 1, "", "conv_px_kernel"),  # ragged channels, 12-pixel rows: pixel tiles
        (2, "1, 8, 7, 7", 8, 40, 5, 2, "", "conv_px_kernel"),  # 5x5 taps over one 49-pixel tile
        (2, "1, 8, 4, 60", 8, 16, 3, 1, "", "conv_ws_kernel"),  # rows 60 of 64 wide: row tiles
        (2, "2, 8, 5, 56", 8, 24, 3, 1, "", "conv_ws_kernel"),  # odd rows start 8 columns early (aligned)
        (2, "1, 256, 5, 5", 256, 16, 3, 1, "", "conv_ws_kernel"),  # pixel tiles too large: row tiles of 8
        (1, "2, 24, 70", 24, 40, 5, 2, "", "conv_ws_kernel"),  # 5 taps, columns in blocks of 64
        (2, "1, 16, 6, 6", 16, 32, 3, 0, "", "conv_ws_kernel"),  # no padding: a smaller output
        (1, "1, 8, 40", 8, 16, 9, 4, "", "conv_rows_kernel"),  # more taps than the kernel has: rows
        (2, "1, 16, 11, 13", 16, 32, 3, 1, ", stride=2", "conv_ws_kernel"),  # strided rows
        (2, "1, 8, 7, 7", 8, 40, 3, 2, ", dilation=2", "conv_ws_kernel"),  # the input's size, but dilated
    ],
)
def test_stationary_weights_are_correct_on_the_simulator(
    tmp_path: Path, d: int, shape: str, c_in: int, c_out: int, k: int, pad: int, extra: str, kernel: str
) -> None:
    """Each shape is computed exactly, by the stationary kernel where its taps fit, else by the row
    kernel the module carries."""
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM.format(d=d, shape=shape, c_in=c_in, c_out=c_out, k=k, pad=pad, extra=extra))
    seed = _seed(f"conv{d}d_fp16").replace("padding=kernel_size // 2)", f"padding={pad}{extra})")
    out = rewrite(seed)
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
    assert res.profile is not None
    assert [launch["kernel"] for launch in res.profile["launches"]] == [kernel]
