"""Launch-config moves for GPU candidates (mutations/gpu_moves.launch_config_mutations): torch.compile's
GPU draft carries Inductor's autotuned num_warps / num_stages as literals, the only knobs its literal
grids leave free; before these moves a search from that draft ended at once ("no untried mutation")."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.gpu_moves import (
    _set_launch_literal,
    gpu_mutations,
    launch_config_mutations,
)

DRAFT = Path(__file__).parents[1] / "tune" / "fixtures" / "h200" / "encoder_draft.py"

MODULE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def sum_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(x_ptr + start + tl.arange(0, BLOCK), mask=start + tl.arange(0, BLOCK) < n)
    tl.store(y_ptr, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y, s = torch.empty_like(x), torch.empty(1, device=x.device)
        warps = 4
        copy_kernel[(4,)](x, y, x.numel(), BLOCK=256, num_warps=4, num_stages=1)
        sum_kernel[(1,)](y, s, y.numel(), BLOCK=256, num_warps=8, num_stages=2)  # the rows' sum
        copy_kernel[(4,)](y, x, x.numel(), BLOCK=256, num_warps=warps)
        return s
'''


def _changed(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]


def test_one_step_each_way_of_the_literal_options_of_each_launch() -> None:
    names = sorted(m.name for m in launch_config_mutations(MODULE))
    assert names == sorted(
        [
            "num_warps=2@copy_kernel#0",
            "num_warps=8@copy_kernel#0",
            "num_warps=4@sum_kernel#0",
            "num_warps=16@sum_kernel#0",
            "num_stages=1@sum_kernel#0",  # only the kernel with a loop that loads is pipelined
            "num_stages=3@sum_kernel#0",
        ]
    )  # the second copy's num_warps is a variable: left alone


def test_a_move_changes_that_launch_s_literal_and_nothing_else() -> None:
    move = next(m for m in launch_config_mutations(MODULE) if m.name == "num_stages=3@sum_kernel#0")
    out = move.apply(MODULE)
    assert _changed(MODULE, out) == [
        "-        sum_kernel[(1,)](y, s, y.numel(), BLOCK=256, num_warps=8, num_stages=2)  # the rows' sum",
        "+        sum_kernel[(1,)](y, s, y.numel(), BLOCK=256, num_warps=8, num_stages=3)  # the rows' sum",
    ]
    ast.parse(out)
    with pytest.raises(MutationError):
        _set_launch_literal(MODULE, "copy_kernel", 1, "num_warps", 8)  # not a literal there


def test_torch_compile_s_gpu_draft_gets_launch_moves() -> None:
    draft = DRAFT.read_text()
    moves = [m for m in gpu_mutations(draft) if m.family in ("gpu_num_warps", "gpu_num_stages")]
    kernels = {m.kernel for m in moves}
    assert len(kernels) >= 5 and all(k.startswith("triton_") for k in kernels)
    for m in moves[:6]:
        assert len(_changed(draft, m.apply(draft))) == 2  # one launch line, rewritten in place
