"""Epilogue rewrites of dot kernels (mutations/gemm_plan.py)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.gemm_plan import epilogue_mutations, gelu_sigmoid, tanh_argument

SUITE = Path(__file__).parents[2] / "kegen" / "suites" / "production" / "linear_bias_gelu_bf16"


@pytest.mark.parametrize(
    "expr", ["1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)", "2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0", "tl.math.tanh(u)"]
)
def test_the_tanh_spellings_are_recognised(expr: str) -> None:
    arg = tanh_argument(ast.parse(expr, mode="eval").body)
    assert arg is not None and ast.unparse(arg) == "u"
    assert tanh_argument(ast.parse("1.0 - 3.0 / (tl.exp(2.0 * u) + 1.0)", mode="eval").body) is None


def test_the_sigmoid_form_is_the_tanh_form_with_the_cubic_folded() -> None:
    out = gelu_sigmoid((SUITE / "seed.py").read_text())
    folded = "acc = acc / (1.0 + tl.exp(acc * (-1.5957691216057308 - 0.07135481627260025 * (acc * acc))))"
    assert "tanh_u" not in out and "u = " not in out and folded in out
    for a in (-3.0, -0.5, 0.0, 0.7, 4.0):
        u = 0.7978845608028654 * (a + 0.044715 * a**3)
        gelu = 0.5 * a * (1.0 + math.tanh(u))
        assert a / (1.0 + math.exp(-2.0 * u)) == pytest.approx(gelu, abs=1e-12)
        assert a / (
            1.0 + math.exp(a * (-1.5957691216057308 - 0.07135481627260025 * (a * a)))
        ) == pytest.approx(gelu, abs=1e-12)


def test_the_cubic_is_not_folded_where_its_operand_was_rebound_or_differs() -> None:
    seed = (SUITE / "seed.py").read_text()
    rebound = seed.replace(
        "    tanh_u = 1.0 - 2.0", "    acc = acc * 1.0\n    tanh_u = 1.0 - 2.0"
    )  # the GELU's `acc` is no longer the cubic's
    assert rebound != seed
    out = gelu_sigmoid(rebound)
    assert "acc = acc / (1.0 + tl.exp(-2.0 * u))" in out and "u = 0.7978845608028654" in out
    other = seed.replace("(acc + 0.044715 * acc * acc * acc)", "(acc + 0.044715 * acc * acc * bias[None, :])")
    assert other != seed and "tl.exp(-2.0 * u)" in gelu_sigmoid(other)
    cubic = "0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)"
    itself = seed.replace(f"u = {cubic}", f"acc = {cubic}").replace("tl.exp(2.0 * u)", "tl.exp(2.0 * acc)")
    assert itself.count("acc = 0.79788") == 1 and "tl.exp(acc * (" not in gelu_sigmoid(itself)  # a rebound


def test_a_tanh_read_elsewhere_is_kept() -> None:
    src = (
        (SUITE / "seed.py")
        .read_text()
        .replace("acc = 0.5 * acc * (1.0 + tanh_u)", "acc = 0.5 * acc * (1.0 + tanh_u) + tanh_u")
    )
    with pytest.raises(MutationError, match="read elsewhere"):
        gelu_sigmoid(src)
    assert epilogue_mutations(src) == []
    assert epilogue_mutations((SUITE.parent / "gemm_fp16_512" / "seed.py").read_text()) == []


def test_the_rewritten_linear_gelu_is_correct_on_the_simulator(tmp_path: Path) -> None:
    problem = tmp_path / "problem.py"
    problem.write_text(
        (SUITE / "problem.py")
        .read_text()
        .replace("_size(4096)", "48")
        .replace("_size(512)", "64")
        .replace("_size(2048)", "80")
    )
    (m,) = epilogue_mutations((SUITE / "seed.py").read_text())
    res = evaluate(
        problem, m.apply((SUITE / "seed.py").read_text()), config=EvalConfig(target="mtia", trials=1)
    )
    assert res.status.value == "ok", res.message
