"""The mtia weight-stationary rewrite of small-K dot kernels (templates/linear_stationary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.gemm_plan import gelu_sigmoid
from kegen.search.operators.templates.linear_stationary import FALLBACK, rewrite, stationary_mutations

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"


def _seed(name: str) -> str:
    return (PRODUCTION / name / "seed.py").read_text()


def test_plan_form_seeds_get_the_move_once() -> None:
    for name, kernel in (("linear_bias_gelu_bf16", "linear_gelu_kernel"), ("bmm_fp16", "bmm_kernel")):
        move, other = stationary_mutations(_seed(name))
        assert move.name == f"linear_stationary=32x128@{kernel}" and other.name.startswith(
            "linear_stationary=64x64"
        )
        assert move.prior > other.prior
        out = move.apply(_seed(name))
        assert f"def {kernel}{FALLBACK}(" in out and "M_TILES" in out
        assert "for kegen_m_tile in range(pid" in out and "_next = tl.load(" in out  # pipelined
        assert "BLOCK_K=triton.next_power_of_2(K)" in out
        assert stationary_mutations(out) == []  # not rewritten twice
    with pytest.raises(MutationError, match="no jit kernel"):
        rewrite(_seed("softmax_fp32"), "linear_gelu_kernel")
    assert stationary_mutations(_seed("softmax_fp32")) == []


def test_a_kernel_whose_m_program_id_is_read_elsewhere_is_refused() -> None:
    src = _seed("linear_bias_gelu_bf16").replace("acc = 0.5 * acc", "acc = 0.5 * (acc + pid_m * 0)")
    assert src != _seed("linear_bias_gelu_bf16")
    with pytest.raises(MutationError, match="read beyond the M offsets"):
        rewrite(src, "linear_gelu_kernel")


@pytest.mark.parametrize(
    ("batch", "in_f", "out_f", "kernel"),
    [
        ("200", "48", "2100", "linear_gelu_kernel"),  # 33 N blocks: one program walks the 4 M tiles
        ("37", "48", "80", "linear_gelu_kernel"),  # one M tile per program, ragged M, N and K
        ("37", "1024", "24", "linear_gelu_kernel_tiled"),  # K too large to stay: the original kernel
    ],
)
def test_the_stationary_linear_is_correct_on_the_simulator(
    tmp_path: Path, batch: str, in_f: str, out_f: str, kernel: str
) -> None:
    problem = tmp_path / "problem.py"
    text = (PRODUCTION / "linear_bias_gelu_bf16" / "problem.py").read_text()
    problem.write_text(
        text.replace("_size(4096)", batch).replace("_size(512)", in_f).replace("_size(2048)", out_f)
    )
    src = stationary_mutations(gelu_sigmoid(_seed("linear_bias_gelu_bf16")))[0].apply(
        gelu_sigmoid(_seed("linear_bias_gelu_bf16"))
    )
    res = evaluate(problem, src, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
    assert [launch["kernel"] for launch in res.profile["launches"]] == [kernel]  # type: ignore[index]


def test_the_stationary_bmm_is_correct_on_the_simulator(tmp_path: Path) -> None:
    text = (PRODUCTION / "bmm_fp16" / "problem.py").read_text()
    small = text
    for old, new in (("BATCH = 16", "BATCH = 2"), ("M = _size(512)", "M = 70"), ("N = _size(512)", "N = 40")):
        assert old in small
        small = small.replace(old, new)
    problem = tmp_path / "problem.py"
    problem.write_text(small.replace("K = _size(512)", "K = 90"))  # 2 batches, ragged M, N and K
    move = stationary_mutations(_seed("bmm_fp16"))[1]  # 64x64
    res = evaluate(problem, move.apply(_seed("bmm_fp16")), config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message


def test_the_gelu_moves_apply_in_either_order() -> None:
    """gelu_sigmoid rewrites a GELU inside the stationary kernel's M loop as it does in the body."""
    seed = _seed("linear_bias_gelu_bf16")
    first = gelu_sigmoid(stationary_mutations(seed)[0].apply(seed))
    assert "tanh_u" not in first and "tl.exp(acc * (-1.5957691216057308" in first
    assert "linear_gelu_kernel_tiled" in first and first.count("tl.exp(acc * (") == 2  # both kernels
