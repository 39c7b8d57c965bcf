"""The quantized-linear, RoPE and GroupNorm drafts as GPU code: each checked against its reference in
Triton's interpreter (a fresh process, see gpu_interp.py), at the small shapes of their mtia tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from tests.search import test_drafting_group_norm as group_norm
from tests.search import test_drafting_quant as quant
from tests.search import test_drafting_rope as rope
from tests.triton_interpreter import runs_gpu_templates

HELPER = Path(__file__).with_name("gpu_interp.py")
CASES = [
    (quant, "linear_bias_gelu", "dequant_linear_kernel"),
    (quant, "scale_in_epilogue_residual", "dequant_linear_kernel"),
    (quant, "group_wise_scales", "GROUP"),
    (rope, "buffers_sliced_fp16", "rope_kernel"),
    (rope, "interleaved_half_tables", "rope_kernel"),
    (group_norm, "function_upcast_fp16", "group_norm_kernel"),
    (group_norm, "long_span_passes", "group_norm_kernel"),
]


@runs_gpu_templates
@pytest.mark.parametrize(("module", "name", "kernel"), CASES, ids=[c[1] for c in CASES])
def test_draft_is_exact_in_tritons_interpreter(module, name: str, kernel: str, tmp_path: Path) -> None:
    problem = module._problem(tmp_path, name)
    a = analyze(problem)
    assert a.source is not None and kernel in a.source, a.summary
    candidate = tmp_path / "candidate.py"
    candidate.write_text(a.source)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    got = subprocess.run(
        [sys.executable, str(HELPER), "check", str(problem), str(candidate), "2e-2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0 and got.stdout.strip().endswith("ok"), got.stderr[-3000:]
