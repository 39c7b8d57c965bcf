"""Depthwise convolutions drafted as the stencil template (drafting/conv.py, templates/conv/depthwise.py)."""

from __future__ import annotations

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")


def _problem(tmp_path, name: str, conv: str, inputs: str):
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        f"        super().__init__()\n        self.dw = {conv}\n\n    def forward(self, x):\n"
        f"        return self.dw(x)\n\n\ndef get_inputs():\n    return {inputs}\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return path


CASES = {
    "fp32_same": ("nn.Conv2d(24, 24, 3, padding=1, groups=24)", "[torch.randn(2, 24, 13, 21)]"),
    "fp16_strided_dilated": (
        "nn.Conv2d(40, 40, (3, 5), stride=2, padding=2, dilation=(2, 1), groups=40, bias=False).half()",
        "[torch.randn(1, 40, 19, 23, dtype=torch.float16)]",
    ),
    # 1-D: the stencil on rows of height 1 (a conformer's / ConvNeXt-1D's depthwise conv)
    "conv1d_fp32_same": ("nn.Conv1d(24, 24, 7, padding=3, groups=24)", "[torch.randn(2, 24, 50)]"),
    "conv1d_fp16_strided_dilated": (
        "nn.Conv1d(16, 16, 5, stride=2, padding=4, dilation=2, groups=16, bias=False).half()",
        "[torch.randn(3, 16, 41, dtype=torch.float16)]",
    ),
}


@needs_mtia
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_depthwise_conv_is_drafted_as_the_stencil_and_is_correct(tmp_path, case: str) -> None:
    problem = _problem(tmp_path, case, *CASES[case])
    a = analyze(problem)
    assert a.op_class == "convolution" and "kegen_depthwise_kernel" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message


def test_grouped_or_multiplier_convs_are_not_depthwise(tmp_path) -> None:
    for name, conv in (("grouped", "nn.Conv2d(16, 16, 3, padding=1, groups=4)"),
                       ("multiplier", "nn.Conv2d(16, 32, 3, padding=1, groups=16)")):  # fmt: skip
        a = analyze(_problem(tmp_path, name, conv, "[torch.randn(1, 16, 8, 8)]"))
        assert a.source is None or "kegen_depthwise_kernel" not in a.source


PLAIN = {
    "conv2d_fp32": ("nn.Conv2d(16, 24, 3, padding=1)", "[torch.randn(2, 16, 12, 20)]"),
    "conv1d_fp16_nobias": ("nn.Conv1d(8, 40, 5, padding=1, bias=False).half()",
                           "[torch.randn(2, 8, 70, dtype=torch.float16)]"),  # fmt: skip
}


@needs_mtia
@pytest.mark.parametrize("case", sorted(PLAIN))
def test_a_plain_conv_module_is_drafted_in_the_seed_form_the_conv_moves_take(tmp_path, case: str) -> None:
    from kegen.search.operators.templates.conv.rows import conv_mutations
    from kegen.search.operators.templates.conv.stationary import stationary_mutations

    problem = _problem(tmp_path, case, *PLAIN[case])
    a = analyze(problem)
    assert a.op_class == "convolution" and "kegen_conv_seed_kernel" in a.source
    assert conv_mutations(a.source) and stationary_mutations(a.source)  # the moves recognise the draft
    cfg = EvalConfig(target="mtia", seed=5, trials=2)
    for source in (a.source, conv_mutations(a.source)[0].apply(a.source)):
        r = evaluate(str(problem), source, config=cfg)
        assert r.ok, r.message


@needs_mtia
def test_a_strided_conv_module_is_drafted_in_the_seed_form(tmp_path) -> None:
    """Strides are the module's, read at forward time (tests/search/test_drafting_conv_chain.py has
    BatchNorm, activation and functional chains)."""
    problem = _problem(tmp_path, "strided", "nn.Conv2d(8, 8, 3, stride=2, padding=1)", "[torch.randn(1, 8, 9, 9)]")
    a = analyze(problem)
    assert a.source is not None and "kegen_conv_seed_kernel" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=2, trials=2))
    assert r.ok, r.message


def test_geometry_bound_to_a_literal_is_not_a_block(tmp_path) -> None:
    """The conv seed binds `kh, ph = 1, 0` on its Conv1d branch and launches `KH=kh, PAD_H=ph`: the
    GEMM plan took them for blocks ("KH 1 -> 64"), which on a Conv1d would have run 64 rows of taps."""
    from kegen.search.operators.mutations.blocks import find_blocks

    source = analyze(_problem(tmp_path, "c1", "nn.Conv1d(8, 16, 3, padding=1)", "[torch.randn(1, 8, 40)]")).source
    params = {s.param for s in find_blocks(source)}
    assert {"BLOCK_CO", "BLOCK_CI", "BLOCK_P"} <= params and not params & {"KH", "KW", "PAD_H", "PAD_W"}
