"""Gated linear layers (SwiGLU, GEGLU) drafted with the gate and up products of one input in one kernel
(`templates.gemm.fuse_gates`, offered beside the layer-per-kernel draft), checked on the simulator and
in Triton's interpreter, and the graphs where no pair may fuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import evaluate
from kegen.search.operators.drafting import analyze, draft_seeds
from kegen.search.operators.drafting.matmul import GATED_VARIANT
from kegen.search.operators.templates.gemm import LinearStage, fuse_gates
from tests.search.interp_check import assert_matches_in_interpreter
from tests.search.test_drafting import FIXTURES, QUICK, _problem
from tests.triton_interpreter import runs_gpu_templates

BIASED_GATE = """self.gate = nn.Linear(24, 40)
self.up = nn.Linear(24, 40)
self.down = nn.Linear(40, 24)"""


def _biased(tmp_path: Path) -> Path:
    """GEGLU with biases on both projections, the gate read second."""
    return _problem(
        tmp_path,
        "self.down(self.up(x) * F.gelu(self.gate(x), approximate='tanh'))",
        "torch.randn(3, 7, 24)",
        init=BIASED_GATE,
    )


def _scaled(tmp_path: Path) -> Path:
    """A gate whose epilogue reads a model tensor (a per-column scale): it stays a kernel of its own."""
    init = BIASED_GATE + "\nself.scale = nn.Parameter(torch.rand(40) + 0.5)"
    return _problem(
        tmp_path,
        "self.down(F.silu(self.gate(x) * self.scale) * self.up(x))",
        "torch.randn(10, 24)",
        init=init,
    )


def _gate_read_twice(tmp_path: Path) -> Path:
    """The gate's activation read by two later layers: both would need it, so it is stored."""
    init = BIASED_GATE + "\nself.up2 = nn.Linear(24, 40)"
    return _problem(
        tmp_path,
        "self.down(((g := torch.sigmoid(self.gate(x))) * self.up(x)) + g * self.up2(x))",
        "torch.randn(10, 24)",
        init=init,
    )


FUSED = {
    "gated_mlp_params": lambda tmp: FIXTURES / "gated_mlp_params.py",
    "geglu_chunk": lambda tmp: FIXTURES / "geglu_chunk.py",
    "swiglu_sliced": lambda tmp: FIXTURES / "swiglu_sliced.py",
    "biased_gelu_tanh": _biased,
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_gated_variant_is_one_kernel_per_pair_and_correct_on_the_simulator(name: str, tmp_path: Path) -> None:
    path = FUSED[name](tmp_path)
    a = analyze(path)
    assert a.source is not None and [what for what, _ in a.variants] == [GATED_VARIANT], a.summary
    source = a.variants[0][1]
    assert "gacc += tl.dot(a, g)" in source and source.count("@triton.jit") == 2
    assert "e0_ptr" not in source  # the gate's output is neither stored nor read back
    result = evaluate(path, source, config=QUICK)
    assert result.status.value == "ok", f"{name}: {result.status} {result.message}"


def test_a_gate_and_up_exchanged_is_caught(tmp_path: Path) -> None:
    """The check above means something: the activation applied to the up product instead is wrong."""
    path = FIXTURES / "gated_mlp_params.py"
    source = analyze(path).variants[0][1]
    fused = "g0 = (gacc / (1.0 + tl.exp(-gacc)))\n    t0 = (g0 * acc)"
    swapped = source.replace(fused, "g0 = (acc / (1.0 + tl.exp(-acc)))\n    t0 = (g0 * gacc)")
    assert swapped != source
    assert evaluate(path, swapped, config=QUICK).status.value == "incorrect"


@pytest.mark.parametrize("make", [_scaled, _gate_read_twice], ids=["gate_reads_a_scale", "gate_read_twice"])
def test_no_gated_variant_where_the_gate_output_is_needed_elsewhere(make, tmp_path: Path) -> None:
    a = analyze(make(tmp_path))
    assert a.op_class == "matmul" and a.source is not None, a.summary
    assert a.variants == []


def test_fuse_gates_keeps_the_hosts_other_epilogue_tensors_in_order() -> None:
    gate = LinearStage("wg", None, ("t0 = tl.sigmoid(acc)",), "t0", (), "h", "y0")
    host = LinearStage(
        "wu",
        "bu",
        ("t0 = (e0 * acc)", "t1 = (t0 + e1)", "t2 = (t1 * e2)"),
        "t2",
        (("r", "full"), ("y0", "full"), ("s", "row")),
        "h",
        "y1",
    )
    fused = fuse_gates([gate, host, LinearStage("wd", None, source="y1", target="y2")])
    assert fused is not None and len(fused) == 2
    got = fused[0]
    assert (
        got.gate is not None and got.gate.weight == "wg" and got.gate.epilogue == ("g0 = tl.sigmoid(gacc)",)
    )
    assert got.epilogue == ("t0 = (e0 * acc)", "t1 = (t0 + g0)", "t2 = (t1 * e1)")
    assert got.extras == (("r", "full"), ("s", "row"))
    assert fuse_gates([host]) is None


def test_draft_seeds_offer_the_gated_variant_after_the_template() -> None:
    drafts, _ = draft_seeds(FIXTURES / "geglu_chunk.py", inductor=False, target="mtia")
    assert [d.origin for d in drafts] == ["template:matmul", "template:matmul:variant"]
    assert GATED_VARIANT in drafts[1].description


@runs_gpu_templates
def test_gated_variant_is_exact_in_tritons_interpreter(tmp_path: Path) -> None:
    path = _biased(tmp_path)
    assert_matches_in_interpreter(path, analyze(path).variants[0][1], tmp_path)
