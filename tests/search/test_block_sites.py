"""Block sites written the ways real launchers write them (mutations.blocks + mutations.grids): a constexpr
passed positionally, a kernel default the launch omits, a flattened program order, a `(n + B - 1) // B`
grid; and, on the simulator, a conv whose grid follows its output-channel and pixel blocks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.blocks import block_mutations, find_blocks, set_block

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"

KERNEL = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, BLOCK_W: tl.constexpr = 128):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.arange(0, BLOCK_W)[:1], mask=offs < n)
"""


def _src(launch: str) -> str:
    return KERNEL + textwrap.dedent(launch)


def _site(src: str, param: str):  # type: ignore[no-untyped-def]
    return next(s for s in find_blocks(src) if s.param == param)


def test_a_positional_constexpr_is_a_site_and_its_grid_follows() -> None:
    src = _src("""
        def launch(x, n):
            k[(triton.cdiv(n, 64),)](x, n, 64, 1)
        """)
    site = _site(src, "BLOCK")
    assert site.pos == 2 and site.axis == 0 and site.value == 64
    assert "EVEN" not in {s.param for s in find_blocks(src)}  # a positional flag is not a block
    out = set_block(src, site, 128)
    assert "k[triton.cdiv(n, 128),](x, n, 128, 1)" in out.replace("(triton", "triton")


def test_a_positional_block_named_by_its_use_is_a_site() -> None:
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def red(x_ptr, y_ptr, n, BK: tl.constexpr, FLAG: tl.constexpr):
            acc = tl.zeros((BK,), dtype=tl.float32)
            for k in range(0, n, BK):
                acc += tl.load(x_ptr + k + tl.arange(0, BK), mask=k + tl.arange(0, BK) < n, other=0.0)
            tl.store(y_ptr, tl.sum(acc, axis=0))

        def launch(x, y, n):
            red[(1,)](x, y, n, 32, 1)
        """)
    (site,) = find_blocks(src)  # BK sizes a block (tl.arange); FLAG is not a block
    assert site.param == "BK" and site.pos == 3 and site.axis is None
    assert "red[1,](x, y, n, 64, 1)" in set_block(src, site, 64)


def test_an_omitted_default_is_set_by_a_keyword_with_the_grid() -> None:
    src = _src("""
        def launch(x, n):
            k[(triton.cdiv(n, 64),)](x, n, BLOCK=64, EVEN=1)
        """)
    block_w = _site(src, "BLOCK_W")
    assert block_w.default and block_w.value == 128 and block_w.axis is None
    out = set_block(src, block_w, 256)
    assert "BLOCK_W=256" in out and "BLOCK_W: tl.constexpr=128" in out  # the kernel keeps its default
    names = {m.name for m in block_mutations(src)}
    assert {"BLOCK_W=256", "BLOCK=128"} <= {n.split("@")[0] for n in names}


def test_a_rounded_up_division_follows_both_literals() -> None:
    src = _src("""
        def launch(x, n):
            grid = ((n + 63) // 64,)
            k[grid](x, n, BLOCK=64, EVEN=1)
        """)
    out = set_block(src, _site(src, "BLOCK"), 32)
    assert "(n + 31) // 32" in out


FLAT = """
import triton
import triton.language as tl

@triton.jit
def mm(a_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(a_ptr + rm[:, None] * N + rn[None, :], 0.0)
"""


def test_a_flattened_program_order_follows_through_its_variables() -> None:
    src = FLAT + textwrap.dedent("""
        def launch(a, M, N):
            BM, BN = 32, 64
            mm[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](a, M, N, BLOCK_M=BM, BLOCK_N=BN)
        """)
    site = _site(src, "BLOCK_M")
    assert site.axis is None and site.pid and site.tiles
    assert "BM, BN = (64, 64)" in set_block(src, site, 64)


def test_a_flattened_grid_with_literals_follows_unless_ambiguous() -> None:
    src = FLAT + textwrap.dedent("""
        def launch(a, M, N):
            mm[(triton.cdiv(M, 32) * triton.cdiv(N, 64),)](a, M, N, BLOCK_M=32, BLOCK_N=64)
        """)
    out = set_block(src, _site(src, "BLOCK_M"), 128)
    assert "triton.cdiv(M, 128) * triton.cdiv(N, 64)" in out
    same = FLAT + textwrap.dedent("""
        def launch(a, M, N):
            mm[(triton.cdiv(M, 64) * triton.cdiv(N, 64),)](a, M, N, BLOCK_M=64, BLOCK_N=64)
        """)
    with pytest.raises(MutationError, match="ambiguous"):
        set_block(same, _site(same, "BLOCK_M"), 128)


CONV_PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.conv = conv.to(torch.float16)

    def forward(self, x):
        w, b = self.conv.weight.float(), self.conv.bias.float()
        return F.conv2d(x.float(), w, b, padding=self.conv.padding).to(x.dtype)


def get_inputs():
    return [torch.randn(1, 16, 10, 10, dtype=torch.float16)]


def get_init_inputs():
    return [16, 96, 3]
"""


@pytest.mark.slow
def test_conv_grid_follows_its_blocks_on_the_simulator(tmp_path: Path) -> None:
    """C_out 96 and 100 pixels: BLOCK_CO 32 -> 64 and BLOCK_P 64 -> 32 (more pixel programs) are correct
    only with the literal grid `(n, cdiv(c_out, 32), cdiv(h * w_, 64))` rewritten with them."""
    problem = tmp_path / "problem.py"
    problem.write_text(CONV_PROBLEM)
    seed = (PRODUCTION / "conv2d_fp16" / "seed.py").read_text()
    sites = {s.param: s for s in find_blocks(seed)}
    out = set_block(seed, sites["BLOCK_CO"], 64)
    out = set_block(out, _site(out, "BLOCK_P"), 32)
    assert "triton.cdiv(c_out, 64)" in out and "triton.cdiv(h * w_, 32)" in out
    sim = EvalConfig(target="mtia", trials=1)
    assert evaluate(problem, out, config=sim).status.value == "ok"
    stale = out.replace("triton.cdiv(h * w_, 32)", "triton.cdiv(h * w_, 64)")  # the grid left behind
    assert evaluate(problem, stale, config=sim).status.value == "incorrect"


def test_a_flattened_gemm_gets_whole_plans_with_its_grid_following() -> None:
    from kegen.profiling.schema import LaunchStat, Profile
    from kegen.search.operators.mutations.plans import plan_mutations

    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
            pid = tl.program_id(0)
            num_pid_n = tl.cdiv(N, BLOCK_N)
            pid_m = pid // num_pid_n
            pid_n = pid % num_pid_n
            rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            rk = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, K, BLOCK_K):
                a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
                b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
                acc += tl.dot(a, b)
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))

        def launch(a, b, c, M, N, K):
            BM, BN, BK = 64, 64, 32
            mm[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](a, b, c, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
        """)
    launch = LaunchStat(kernel="mm", grid=[1024, 1, 1], time_s=1e-4, programs=1024, pes_total=64)
    muts = {
        m.name.split("+")[0]: m
        for m in plan_mutations(src, Profile(target="mtia", device="mtia-2i", launches=[launch]))
    }
    assert "BM, BN, BK = (256, 256, 64)" in muts["plan256=256x256x64"].apply(src)  # BLOCK_K stays the K block
    assert "BM, BN, BK = (128, 128, 64)" in muts["plan128=128x128x64"].apply(src)


def test_a_default_supplied_by_autotune_is_not_a_site() -> None:
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)

        def launch(x, n):
            k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
        """)
    assert find_blocks(src) == []  # a launch keyword would conflict with the autotuner's configs
