"""Kernels the MTIA model cannot run fail with a clear error naming kernel, op, source line and fix."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from lowering.codegen.errors import LocalStoreOverflowError, UnsupportedError


@triton.jit
def big_block_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.exp(x) + x
    tl.store(y_ptr + offs, y)


def test_local_store_overflow_names_tensors_capacity_and_constexpr() -> None:
    x = torch.zeros(1 << 17)
    with pytest.raises(LocalStoreOverflowError) as info:
        big_block_kernel[(1,)](x, x, BLOCK=1 << 17)
    msg = str(info.value)
    assert "kernel big_block_kernel" in msg
    assert "131072xf32" in msg  # the tensor and its size
    assert "capacity is 393216 B" in msg
    assert "BLOCK" in msg  # which constexpr to shrink
    assert "test_lower_errors.py" in msg  # the source line


@triton.jit
def odd_combine(a, b):
    return a * 2 + b


@triton.jit
def custom_reduce_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(y_ptr, tl.reduce(x, 0, odd_combine))


def test_unrecognised_combiner_is_unsupported() -> None:
    x = torch.zeros(16)
    with pytest.raises(UnsupportedError) as info:
        custom_reduce_kernel[(1,)](x, x, BLOCK=16)
    msg = str(info.value)
    assert "kernel custom_reduce_kernel" in msg and "op tt.reduce" in msg
    assert "combine function" in msg and "tl.sum" in msg


@triton.jit
def rank5_kernel(x_ptr):
    offs = tl.arange(0, 2)
    v = tl.load(x_ptr + offs)
    v5 = tl.reshape(v, (1, 1, 1, 1, 2))
    tl.store(x_ptr + tl.reshape(offs, (1, 1, 1, 1, 2)), v5 * 2.0)


def test_rank5_folds_to_four_dims() -> None:
    x = torch.tensor([1.0, 2.0])
    rank5_kernel[(1,)](x)
    assert x.tolist() == [2.0, 4.0]


@triton.jit
def permute5_kernel(x_ptr, y_ptr):
    offs = tl.arange(0, 32)
    a = tl.reshape(tl.load(x_ptr + offs), (2, 2, 2, 2, 2))
    c = a + tl.permute(a, (4, 3, 2, 1, 0))
    tl.store(y_ptr + offs, tl.reshape(c, (32,)))


def test_unfoldable_rank5_is_split_into_rank4_commands() -> None:
    x = torch.arange(32.0)
    y = torch.empty(32)
    permute5_kernel[(1,)](x, y)
    a = x.reshape(2, 2, 2, 2, 2)
    torch.testing.assert_close(y, (a + a.permute(4, 3, 2, 1, 0)).reshape(32))


@triton.jit
def permute5_big_kernel(x_ptr, y_ptr):
    offs = tl.arange(0, 2048)
    a = tl.reshape(tl.load(x_ptr + offs), (128, 2, 2, 2, 2))
    b = tl.reshape(tl.load(x_ptr + offs), (2, 2, 2, 2, 128))
    c = a + tl.permute(b, (4, 3, 2, 1, 0))
    tl.store(y_ptr + offs, tl.reshape(c, (2048,)))


def test_rank5_too_large_to_split_is_unsupported() -> None:
    x = torch.ones(2048)
    with pytest.raises(UnsupportedError, match="rank 5") as info:
        permute5_big_kernel[(1,)](x, x)
    assert "kernel permute5_big_kernel" in str(info.value)


def test_gpu_tensor_is_rejected_clearly() -> None:
    from lowering.backend.launch import scalar_slot

    assert scalar_slot(1.5, "fp32") == 0x3FF8000000000000
    assert scalar_slot(-1, "i32") == 0xFFFF_FFFF_FFFF_FFFF
