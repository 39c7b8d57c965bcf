"""A SIMD op's narrowing cast computed by the op's own command, and a widening cast read by the
reduction engine directly (rules/arith.fused_cast, rules/casts): results match PyTorch and the
fused casts issue no SIMD_CAST."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.backend import driver
from mtia_sim.isa import Op


def _casts() -> int:
    traces = driver.last_launch().traces
    return sum(1 for t in traces for e in t.events if getattr(e, "op", None) == Op.SIMD_CAST)


@triton.jit
def exp_narrow_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # fp32
    w = tl.load(y_ptr + offs, mask=m, other=0.0)
    e = tl.exp(x)  # only user: the cast below
    tl.store(z_ptr + offs, (e * w).to(z_ptr.dtype.element_ty), mask=m)  # a binary op's cast


def test_a_unary_and_a_binary_op_write_the_narrow_type_themselves() -> None:
    x, w = torch.randn(300), torch.randn(300)
    for dtype in (torch.float16, torch.bfloat16):
        z = torch.empty(300, dtype=dtype)
        exp_narrow_kernel[(3,)](x, w, z, 300, BLOCK=128)
        torch.testing.assert_close(z, (torch.exp(x) * w).to(dtype), atol=0, rtol=2 ** -7)
        assert _casts() == 0


@triton.jit
def shared_value_kernel(x_ptr, z_ptr, s_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    e = tl.exp(tl.load(x_ptr + offs))  # two users: the cast and the sum
    tl.store(z_ptr + offs, e.to(tl.float16))
    tl.store(s_ptr, tl.sum(e, axis=0))


def test_a_value_read_twice_keeps_its_own_cast() -> None:
    x = torch.randn(64)
    z, s = torch.empty(64, dtype=torch.float16), torch.empty(1)
    shared_value_kernel[(1,)](x, z, s, BLOCK=64)
    torch.testing.assert_close(z, torch.exp(x).half(), atol=0, rtol=2 ** -10)
    torch.testing.assert_close(s, torch.exp(x).sum().reshape(1), atol=1e-4, rtol=1e-5)
    assert _casts() == 1


@triton.jit
def narrow_sum_kernel(x_ptr, s_ptr, m_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * BLOCK + offs)  # fp16
    tl.store(s_ptr + row, tl.sum(x.to(tl.float32), axis=0))  # widened only for the sum
    tl.store(m_ptr + row, tl.max(x.to(tl.float32), axis=0))


def test_a_widening_read_only_by_a_reduction_is_read_narrow() -> None:
    x = torch.randn(4, 128).half()
    s, m = torch.empty(4), torch.empty(4)
    narrow_sum_kernel[(4,)](x, s, m, BLOCK=128)
    torch.testing.assert_close(s, x.float().sum(1), atol=1e-3, rtol=1e-5)
    torch.testing.assert_close(m, x.float().amax(1), atol=0, rtol=0)
    assert _casts() == 0


@triton.jit
def cast_in_loop_kernel(x_ptr, z_ptr, BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    e = tl.exp(tl.load(x_ptr + offs))  # computed before the loop, narrowed inside it
    for r in range(ROUNDS):
        t = tl.load(x_ptr + BLOCK + offs) * r  # a tile allocated after the narrow value in the body
        tl.store(z_ptr + r * BLOCK + offs, e.to(tl.float16))
        tl.store(z_ptr + (ROUNDS + r) * BLOCK + offs, t.to(tl.float16))


def test_a_cast_inside_a_loop_of_a_value_made_before_it_is_not_fused() -> None:
    """A cast left inside the loop body is not fused into the op before the loop (its lifetime is
    planned in the body, where later tiles could take its place); Triton may also hoist such a cast
    itself. Either way every round stores the same values."""
    x = torch.randn(2 * 64)
    z = torch.empty(6 * 64, dtype=torch.float16)
    cast_in_loop_kernel[(1,)](x, z, BLOCK=64, ROUNDS=3)
    e = torch.exp(x[:64]).half()
    for r in range(3):
        torch.testing.assert_close(z[r * 64 : (r + 1) * 64], e, atol=0, rtol=2**-10)
        torch.testing.assert_close(z[(3 + r) * 64 : (4 + r) * 64], (x[64:] * r).half(), atol=0, rtol=2**-10)
