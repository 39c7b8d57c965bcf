"""Epilogue fusion (mutations/epilogue.py): Inductor drafts of GEMM/convolution + pointwise problems,
fused into one kernel and checked numerically against PyTorch on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.epilogue import fuse_epilogue, fusion_mutations
from kegen.tune.capture import draft

LINEAR_GELU = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 40)

    def forward(self, x, r):
        return F.gelu(self.fc(x)) + r


def get_inputs():
    return [torch.randn(2, 9, 24), torch.randn(2, 9, 40)]


def get_init_inputs():
    return []
"""

CONV_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2.0


def get_inputs():
    return [torch.randn(2, 3, 7, 6)]


def get_init_inputs():
    return []
"""

# the GEMM's output is also returned: the GEMM keeps its own store, the epilogue writes the other
TWO_OUTPUTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        c = a @ b
        return c, torch.sigmoid(c)


def get_inputs():
    return [torch.randn(33, 17), torch.randn(17, 20)]


def get_init_inputs():
    return []
"""


def _fused(tmp_path: Path, text: str) -> tuple[Path, str, str]:
    problem = tmp_path / "problem.py"
    problem.write_text(text)
    seed = draft(problem)
    return problem, seed, fuse_epilogue(seed)


def _launches(source: str) -> int:
    return sum(1 for line in source.splitlines() if "](" in line and "grid" in line)


@pytest.mark.parametrize(
    "text", [LINEAR_GELU, CONV_RELU, TWO_OUTPUTS], ids=["linear_gelu", "conv_relu", "two_outputs"]
)
def test_the_fused_kernel_is_correct_and_launches_once_less(tmp_path: Path, text: str) -> None:
    problem, seed, fused = _fused(tmp_path, text)
    cfg = EvalConfig(target="mtia", machine="mtia-2i", trials=1, atol=1e-4, rtol=5e-4)
    before = evaluate(problem, seed, config=cfg)
    after = evaluate(problem, fused, config=cfg)
    assert before.status.value == "ok", before.message
    assert after.status.value == "ok", after.message
    assert len(after.profile["launches"]) == len(before.profile["launches"]) - 1
    assert after.candidate_time_s < before.candidate_time_s


def test_the_gemm_keeps_its_store_where_its_output_is_read_later(tmp_path: Path) -> None:
    _, _, fused = _fused(tmp_path, TWO_OUTPUTS)
    kernel = fused[fused.index("def kegen_matmul_kernel_epilogue0") :].split("\ndef ")[0]
    assert kernel.count("tl.store(") == 2


def test_a_consumer_reading_the_output_elsewhere_than_xindex_is_refused(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(TWO_OUTPUTS.replace("torch.sigmoid(c)", "c.t().contiguous() * 2"))
    seed = draft(problem)
    with pytest.raises(MutationError):
        fuse_epilogue(seed)
    assert fusion_mutations(seed) == []


def test_a_source_without_a_gemm_is_refused() -> None:
    with pytest.raises(MutationError, match="ModelNew|GEMM"):
        fuse_epilogue("import torch\n\nclass ModelNew:\n    def forward(self, x):\n        return x\n")


def test_a_consumer_reading_a_shifted_view_of_the_output_is_refused(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(LINEAR_GELU)
    seed = draft(problem)
    alias = "buf1 = torch.as_strided(buf0, (2, 9, 40), (360, 40, 1), 0)"
    assert alias in seed  # Inductor's in-place epilogue on a view of the GEMM's buffer
    fuse_epilogue(seed)  # starts at the buffer's first element: fused
    with pytest.raises(MutationError, match="shifted view"):
        fuse_epilogue(seed.replace(alias, alias[:-2] + "40)"))
