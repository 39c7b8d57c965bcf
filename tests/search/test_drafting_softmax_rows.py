"""Softmax over the last dim drafted as the rows template (templates.rows.softmax_rows): rows that
fit a block in registers, several a program; longer rows online. Each draft checked on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia
from tests.search.test_drafting_fused_reduce import PROBLEM

CASES = {
    "one_pass_fp32": ("torch.softmax(x, dim=-1)", "torch.randn(100, 70) * 4"),
    "one_pass_fp16_3d": ("torch.nn.functional.softmax(x, dim=-1)", "torch.randn(3, 7, 50, dtype=torch.float16)"),
    "online_wide_rows": ("x.softmax(-1)", "torch.randn(5, 9000) * 3"),
}


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_softmax_is_drafted_as_row_tiles(tmp_path: Path, name: str) -> None:
    expr, inputs = CASES[name]
    path = tmp_path / "p.py"
    path.write_text(PROBLEM.format(args="x", expr=expr, inputs=inputs))
    source = assert_draft_correct_on_mtia(path, "softmax", "softmax_rows_kernel")
    assert ("BLOCK_SIZE = 4096" in source) == (name == "online_wide_rows")  # 9000 columns: the online loop
