"""Packed 4-bit weight-only linear layers drafted as the packed template (drafting/quant_packed.py):
recognised by the weight the reference computes, in several packings and spellings, each draft checked
against its reference on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from kegen.search.operators.drafting.graph import trace
from kegen.search.operators.drafting.quant_packed import draft_packed_linear
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

N, K, G = 48, 256, 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x{extra_args}):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

CASES = {
    # two values a byte along K, low nibble first, offset 8, one bf16 scale per 32 input channels
    "uint8_interleaved_offset_groups": (
        'self.register_buffer("qweight", torch.randint(0, 256, (N, K // 2), dtype=torch.uint8))\n'
        'self.register_buffer("scales", (torch.rand(N, K // G) * 0.01 + 0.001).to(torch.bfloat16))',
        "q = torch.stack([self.qweight & 0xF, self.qweight >> 4], dim=-1).view(N, K)\n"
        "w = (q.float() - 8.0).view(N, K // G, G) * self.scales.float().unsqueeze(-1)\n"
        "return (x.float() @ w.view(N, K).t()).to(x.dtype)",
        "",
        "torch.randn(19, K, dtype=torch.bfloat16)",
    ),
    # int8 words in two planes (cat of the low and high halves), sign-extended, one scale per channel,
    # F.linear with a bias and a ReLU
    "int8_planes_signed_row_scale_bias_relu": (
        'self.register_buffer("qweight", torch.randint(-128, 128, (N, K // 2), dtype=torch.int8))\n'
        'self.register_buffer("scale", (torch.rand(N) * 0.02 + 0.001).to(torch.float16))\n'
        "self.bias = nn.Parameter(torch.randn(N).to(torch.float16))",
        "q = torch.cat([(self.qweight << 4) >> 4, self.qweight >> 4], dim=1)\n"
        "w = q.to(x.dtype) * self.scale[:, None]\n"
        "return torch.relu(F.linear(x, w, self.bias))",
        "",
        "torch.randn(2, 9, K, dtype=torch.float16)",
    ),
    # GPTQ: int32 qweight (K / 8, N) with eight values along K, qzeros (K / G, N / 8) packed along N and
    # stored minus one, scales (K / G, N), expanded with repeat_interleave
    "gptq_int32_packed_zeros": (
        'self.register_buffer("qweight", torch.randint(-2**31, 2**31 - 1, (K // 8, N), dtype=torch.int32))\n'
        'self.register_buffer("qzeros", torch.randint(-2**31, 2**31 - 1, (K // G, N // 8), dtype=torch.int32))\n'
        'self.register_buffer("scales", (torch.rand(K // G, N) * 0.02 + 0.001).to(torch.float16))\n'
        'self.register_buffer("shifts", torch.arange(0, 32, 4, dtype=torch.int32))',
        "q = ((self.qweight.unsqueeze(1) >> self.shifts[None, :, None]) & 15).reshape(K, N)\n"
        "z = ((self.qzeros.unsqueeze(2) >> self.shifts[None, None, :]) & 15).reshape(K // G, N) + 1\n"
        "w = (q - z.repeat_interleave(G, dim=0)).to(torch.float16) * self.scales.repeat_interleave(G, dim=0)\n"
        "return x @ w",
        "",
        "torch.randn(33, K, dtype=torch.float16)",
    ),
    # int32 words along K, highest nibble first, float zero points (N, K / G), divided by a step,
    # fp32 activations with a residual
    "int32_reversed_float_zeros_divided": (
        'self.register_buffer("packed", torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int32))\n'
        'self.register_buffer("zeros", torch.rand(N, K // G) * 15)\n'
        'self.register_buffer("step", torch.rand(N, K // G) * 40 + 20)',
        "shifts = torch.arange(28, -1, -4, dtype=torch.int32)\n"
        "q = ((self.packed.unsqueeze(-1) >> shifts) & 15).reshape(N, K).float()\n"
        "w = ((q.view(N, K // G, G) - self.zeros.unsqueeze(-1)) / self.step.unsqueeze(-1)).view(N, K)\n"
        "return x @ w.t() + r",
        ", r",
        "torch.randn(21, K), torch.randn(21, N)",
    ),
    # AWQ: int32 qweight (K, N / 8) with eight values along N in AWQ's interleaved nibble order, qzeros
    # packed the same way, scales (K / G, N); unpacked with a shift table made in the forward
    "awq_int32_along_n": (
        'self.register_buffer("qweight", torch.randint(-2**31, 2**31 - 1, (K, N // 8), dtype=torch.int32))\n'
        'self.register_buffer("qzeros", torch.randint(-2**31, 2**31 - 1, (K // G, N // 8), dtype=torch.int32))\n'
        'self.register_buffer("scales", (torch.rand(K // G, N) * 0.02 + 0.001).to(torch.float16))',
        "shifts = torch.arange(0, 32, 4, dtype=torch.int32)\n"
        "order = torch.arange(N).view(-1, 8)[:, [0, 4, 1, 5, 2, 6, 3, 7]].reshape(-1)\n"
        "iw = (self.qweight[:, :, None] >> shifts[None, None, :]).reshape(K, N)[:, order] & 15\n"
        "iz = (self.qzeros[:, :, None] >> shifts[None, None, :]).reshape(K // G, N)[:, order] & 15\n"
        "w = (iw - iz.repeat_interleave(G, dim=0)).to(torch.float16) * self.scales.repeat_interleave(G, dim=0)\n"
        "return F.silu(x @ w)",
        "",
        "torch.randn(2, 11, K, dtype=torch.float16)",
    ),
    # uint8 words in planes with int32 zero points and fp32 scales per group: each plane reads its own
    # group's zero and scale
    "uint8_planes_int_zeros_groups": (
        'self.register_buffer("qweight", torch.randint(0, 256, (N, K // 2), dtype=torch.uint8))\n'
        'self.register_buffer("zeros", torch.randint(0, 16, (N, K // G), dtype=torch.int32))\n'
        'self.register_buffer("scales", torch.rand(N, K // G) * 0.02 + 0.001)',
        "q = torch.cat([self.qweight & 15, self.qweight >> 4], dim=1).to(torch.int32)\n"
        "w = (q - self.zeros.repeat_interleave(G, dim=1)).float() * self.scales.repeat_interleave(G, dim=1)\n"
        "return x @ w.t()",
        "",
        "torch.randn(9, K)",
    ),
    # one scale for the whole tensor and a half-integer offset (no zero-point tensor)
    "uint8_scalar_scale_half_offset": (
        'self.register_buffer("qweight", torch.randint(0, 256, (N, K // 2), dtype=torch.uint8))\n'
        'self.register_buffer("scale", torch.tensor(0.0125))',
        "q = torch.stack([self.qweight & 0xF, self.qweight >> 4], dim=-1).view(N, K).float()\n"
        "return x @ ((q - 7.5) * self.scale).t()",
        "",
        "torch.randn(13, K)",
    ),
    # a scale per output channel and an int8 zero point per group: two granularities
    "int32_row_scale_group_zeros": (
        'self.register_buffer("packed", torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int32))\n'
        'self.register_buffer("zeros", torch.randint(0, 16, (N, K // G), dtype=torch.int8))\n'
        'self.register_buffer("scale", (torch.rand(N, 1) * 0.02 + 0.001).to(torch.float16))',
        "shifts = torch.arange(0, 32, 4, dtype=torch.int32)\n"
        "q = ((self.packed.unsqueeze(-1) >> shifts) & 15).reshape(N, K)\n"
        "z = self.zeros.repeat_interleave(G, dim=1)\n"
        "return x @ ((q - z).to(x.dtype) * self.scale).t()",
        "",
        "torch.randn(7, K, dtype=torch.float16)",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    init, body, extra_args, inputs = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(
        HEAD.format(
            init="\n".join("        " + line for line in init.split("\n")),
            body="\n".join("        " + line for line in body.split("\n")),
            extra_args=extra_args,
            inputs=inputs,
        )
    )
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_packed_int4_linear_is_drafted_and_correct(tmp_path, name: str) -> None:
    """Each packing reads its words in the K loop (no float weight) and agrees with the reference."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.op_class == "matmul" and a.source is not None, a.summary
    assert "packed_linear_kernel" in a.source and ("(p & 15)" in a.source or "(p >> " in a.source)
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message


def test_the_layout_found_is_the_one_written(tmp_path) -> None:
    """What the decoder settles on, read from the draft: GPTQ's K-major int32 words and N-packed zeros
    with their +1; AWQ's words along N, one accumulator per element position; the planes of the signed case; the reversed nibble order; uint8 words' high nibble
    read without a mask and the offset subtracted in int8."""
    gptq = analyze(_problem(tmp_path, "gptq_int32_packed_zeros")).source or ""
    assert "p.stride(1), p.stride(0)" in gptq and "rn // 8" in gptq and "+ 1)" in gptq
    planes = analyze(_problem(tmp_path, "int8_planes_signed_row_scale_bias_relu")).source or ""
    assert "1 * KW + kw" in planes and "GROUP=BLOCK_SIZE_K" in planes
    assert "((p << 4) >> 4)" in planes and "(p >> 4)" in planes  # sign-extended by arithmetic shifts
    awq = analyze(_problem(tmp_path, "awq_int32_along_n")).source or ""
    assert "rn1 = rw * 8 + 1" in awq and "acc7 = tl.zeros([BLOCK_M, BLOCK_N // 8]" in awq
    assert "w1 = (((p >> 16) & 15) - z1).to(a.dtype)" in awq  # element 1 in nibble 4, its zero an integer
    scalar = analyze(_problem(tmp_path, "uint8_scalar_scale_half_offset")).source or ""
    assert "reshape(1, 1)" in scalar and "- 7.5).to(a0.dtype)" in scalar and "GROUP=BLOCK_SIZE_K" in scalar
    mixed = analyze(_problem(tmp_path, "int32_row_scale_group_zeros")).source or ""
    assert "GROUP=32" in mixed and "s.stride(0), 0" in mixed  # the channel's scale at every group
    offset = analyze(_problem(tmp_path, "uint8_interleaved_offset_groups")).source or ""
    assert "w1 = ((p >> 4).to(tl.int8) - 8).to(a1.dtype)" in offset
    reversed_ = analyze(_problem(tmp_path, "int32_reversed_float_zeros_divided")).source or ""
    assert (
        "(p >> 28)" in reversed_.split("a0 = ")[1].split("a1 = ")[0]
        and "acc += part / tl.load(s_ptr" in reversed_
    )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("self.scales.float().unsqueeze(-1)", "self.scales.float().unsqueeze(-1) * 2.0"),
        ("(q.float() - 8.0)", "(q.float() - 8.0 + x.float()[:1, :1])"),
        ("self.qweight >> 4], dim=-1)", "(self.qweight >> 4) & 0x7], dim=-1)"),
    ],
    ids=["scale_not_a_model_tensor", "weight_reads_the_input", "not_a_4bit_value"],
)
def test_weights_kegen_cannot_read_are_refused(tmp_path, change: str, why: str) -> None:
    """A scale computed in the forward from random numbers, a weight that depends on the input, a
    decoding whose high values are 3-bit: no packed draft (the others may draft what they cover)."""
    text = _problem(tmp_path, "uint8_interleaved_offset_groups").read_text()
    assert change in text
    path = tmp_path / "changed.py"
    path.write_text(text.replace(change, why))
    t = trace(path)
    assert draft_packed_linear(t) is None
