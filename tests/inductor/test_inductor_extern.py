"""kegen's Triton kernels for what Inductor leaves to aten: matmuls and every convolution form."""

from __future__ import annotations

import pytest
import torch

from kegen.inductor import extern_kernels as ek


def test_addmm_and_bmm_match_torch() -> None:
    torch.manual_seed(0)
    a, b, bias = torch.randn(20, 24), torch.randn(24, 40), torch.randn(40)
    out = torch.empty(20, 40)
    ek.kegen_addmm(bias, a, b, alpha=2.0, beta=0.5, out=out)
    torch.testing.assert_close(out, torch.addmm(bias, a, b, alpha=2.0, beta=0.5), atol=1e-4, rtol=1e-4)
    a3, b3 = torch.randn(3, 8, 12), torch.randn(3, 12, 5).transpose(1, 2).contiguous().transpose(1, 2)
    out3 = torch.empty(3, 8, 5)
    ek.kegen_bmm(a3, b3, out=out3)
    torch.testing.assert_close(out3, torch.bmm(a3, b3), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "x, w, kw, transposed",
    [
        ((2, 4, 9), (6, 4, 3), dict(stride=2, padding=1, dilation=1, groups=1), False),
        ((1, 6, 7, 7), (6, 1, 3, 3), dict(stride=1, padding=1, dilation=1, groups=6), False),  # depthwise
        # depthwise with two output channels a channel, strided and dilated; 1-D and 3-D depthwise
        ((2, 3, 9, 11), (6, 1, 3, 3), dict(stride=2, padding=2, dilation=2, groups=3), False),
        ((2, 20, 13), (20, 1, 5), dict(stride=1, padding=2, dilation=1, groups=20), False),
        ((1, 4, 4, 5, 6), (4, 1, 3, 3, 3), dict(stride=1, padding=1, dilation=1, groups=4), False),
        ((1, 4, 8, 8), (4, 2, 3, 3), dict(stride=1, padding=0, dilation=2, groups=2), False),
        ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), dict(stride=1, padding=0, dilation=1, groups=1), False),
        ((1, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, padding=1, dilation=1, groups=1, output_padding=1), True),
        ((1, 4, 3, 3, 3), (4, 1, 2, 2, 2), dict(stride=2, padding=0, dilation=1, groups=2), True),
    ],
)
def test_convolution_matches_torch(x, w, kw, transposed) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(x), torch.randn(w)
    groups = kw["groups"]
    bias = torch.randn(w.shape[1] * groups if transposed else w.shape[0])
    ref = torch.ops.aten.convolution(
        x, w, bias, [kw["stride"]] * (x.dim() - 2), [kw["padding"]] * (x.dim() - 2),
        [kw["dilation"]] * (x.dim() - 2), transposed, [kw.get("output_padding", 0)] * (x.dim() - 2), groups,
    )  # fmt: skip
    y = ek.kegen_convolution(
        x,
        w,
        bias,
        kw["stride"],
        kw["padding"],
        kw["dilation"],
        transposed,
        kw.get("output_padding", 0),
        groups,
    )
    assert y.shape == ref.shape
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)


def test_depthwise_convolution_in_half_precision_over_many_channel_blocks() -> None:
    """A MobileNet-style depthwise 3x3 in fp16 whose 40 channels span three column blocks and whose
    positions are not a multiple of the row block; accumulated in fp32 like the reference."""
    torch.manual_seed(0)
    x, w, bias = torch.randn(2, 40, 10, 9).half(), torch.randn(40, 1, 3, 3).half(), torch.randn(40).half()
    ref = torch.ops.aten.convolution(
        x.float(), w.float(), bias.float(), [1, 1], [1, 1], [1, 1], False, [0, 0], 40
    ).half()
    y = ek.kegen_convolution(x, w, bias, 1, 1, 1, False, 0, 40)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y, ref, atol=2e-3, rtol=2e-3)
