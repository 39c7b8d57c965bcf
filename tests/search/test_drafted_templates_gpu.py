"""The quantized and residual linear, linear graphs and column splits, a head split returned as views,
grouped-query attention, column softmax, transposed and grouped convolutions, RoPE and GroupNorm drafts
as GPU code: each checked against its reference in
Triton's interpreter (a fresh process, see gpu_interp.py), at the small shapes of their mtia tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from tests.search import test_drafting_attention as attention
from tests.search import test_drafting_conv_grouped as conv_grouped
from tests.search import test_drafting_conv_transpose as conv_transpose
from tests.search import test_drafting_group_norm as group_norm
from tests.search import test_drafting_packed as packed
from tests.search import test_drafting_quant as quant
from tests.search import test_drafting_rope as rope
from tests.search.interp_check import assert_matches_in_interpreter
from tests.triton_interpreter import runs_gpu_templates

FIXTURES = Path(__file__).parent / "fixtures_drafting"


class _GroupedQueryAttention:
    _problem = staticmethod(attention.gqa_problem)


class _GroupedConvolution:
    _problem = staticmethod(conv_grouped.grouped_problem)


class _Fixture:
    @staticmethod
    def _problem(tmp_path: Path, name: str) -> Path:
        return FIXTURES / f"{name}.py"


CASES = [
    (_GroupedQueryAttention, "decode", "kegen_attention_kernel"),
    (_GroupedQueryAttention, "prefill", "kegen_attention_kernel"),
    (conv_transpose, "gan_4x4_s2_p1", "kegen_conv_transpose_kernel"),
    (conv_transpose, "one_d", "kegen_conv_transpose_kernel"),
    (conv_transpose, "one_d_k2_s2", "kegen_conv_transpose_tiles_kernel"),
    (_Fixture, "linear_stack_scales", "def _linear_kernel_1(x, weight, bias, e0, e1, e2):"),
    (_Fixture, "geglu_chunk", "self.proj.weight.detach()[40:80]"),
    (_Fixture, "swiglu_sliced", "y1 = _linear_kernel_1(h,"),
    (_Fixture, "linear_heads_split", "return result.reshape(2, 24, 4, 16).transpose(1, 2)"),
    (_GroupedConvolution, "resnext_bn_relu", "kegen_conv_grouped_kernel"),
    (_GroupedConvolution, "partial_pack", "kegen_conv_grouped_kernel"),
    (_Fixture, "log_softmax_channels", "softmax_cols_kernel"),
    (_Fixture, "softmax_long_dim0", "softmax_cols_kernel"),
    (quant, "linear_bias_gelu", "dequant_linear_kernel"),
    (quant, "scale_in_epilogue_residual", "dequant_linear_kernel"),
    (quant, "group_wise_scales", "GROUP"),
    # (the bf16 packed case is not here: Triton's interpreter converts integers to bf16 as raw bits)
    (packed, "gptq_int32_packed_zeros", "packed_linear_kernel"),
    (packed, "awq_int32_along_n", "packed_linear_kernel"),
    (packed, "int8_planes_signed_row_scale_bias_relu", "packed_linear_kernel"),
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
    assert_matches_in_interpreter(problem, a.source, tmp_path)
