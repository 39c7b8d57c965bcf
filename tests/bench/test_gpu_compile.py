"""Drafts compiled for an NVIDIA GPU on this GPU-less host (kegen.bench.gpu_compile), and the exact
float32 dots every nvidia draft states (kegen.search.operators.dot_precision)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from kegen.bench.gpu_compile import compile_candidate
from kegen.search.operators.dot_precision import (
    computes_in_float32,
    exact_dots,
    for_target,
    keep_exact_dots,
    states_exact_dots,
)
from kegen.search.operators.drafting import analyze, draft_seeds
from kegen.search.operators.mutations.gpu_moves import gpu_mutations

FIX = Path(__file__).parent / "fixtures_gpu_compile"
IEEE = 'input_precision="ieee"'


@functools.cache
def _compiles_here() -> str:
    """'' where this Triton compiles a trivial kernel for sm_90 without a GPU; else why not."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    @triton.jit
    def copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))

    try:
        src = triton.compiler.ASTSource(fn=copy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr"},
                                        constexprs={(2,): 64})  # fmt: skip
        triton.compile(src, target=GPUTarget("cuda", 90, 32))
    except Exception as exc:  # noqa: BLE001 - any failure means this host cannot run the check
        return f"{type(exc).__name__}: {exc}"[:300]
    return ""


def _needs_nvidia_compiler() -> None:
    why = _compiles_here()
    if why:
        pytest.skip(f"this Triton cannot compile for sm_90 on this host ({why})")


def test_a_kernel_the_nvidia_pipeline_rejects_is_reported_with_its_launch(tmp_path: Path) -> None:
    _needs_nvidia_compiler()
    results = compile_candidate(FIX / "cumsum_rows.py", FIX / "cumsum_carry_1d.py")
    assert [r.kernel for r in results] == ["cumsum_kernel"]
    (r,) = results
    assert r.error and "PassManager" in r.error, r.error
    assert r.constexprs == {"ROWS": 8, "BLOCK": 1024}
    assert r.signature["x_ptr"] == "*fp32" and r.signature["n_cols"] == "i32"


@pytest.mark.parametrize(
    "problem", ["cumsum_rows", "attention_fp32", "linear_fp32", "matmul_fp32", "conv_fp32"]
)
def test_drafts_compile_for_an_nvidia_gpu(problem: str, tmp_path: Path) -> None:
    _needs_nvidia_compiler()
    drafts, _ = draft_seeds(FIX / f"{problem}.py", inductor=False, target="nvidia")
    (draft,) = drafts
    candidate = tmp_path / "candidate.py"
    candidate.write_text(draft.source)
    results = compile_candidate(FIX / f"{problem}.py", candidate)
    assert results, "the draft launched no kernel"
    assert all(not r.error for r in results), [r.error for r in results]


def test_nvidia_drafts_state_exact_float32_dots_and_other_targets_stay_as_written() -> None:
    source = analyze(FIX / "attention_fp32.py").source
    assert source is not None and "tl.dot(" in source and IEEE not in source
    nvidia = draft_seeds(FIX / "attention_fp32.py", inductor=False, target="nvidia")[0][0].source
    mtia = draft_seeds(FIX / "attention_fp32.py", inductor=False, target="mtia")[0][0].source
    assert mtia == source
    assert nvidia.count("tl.dot(") == nvidia.count(IEEE) == source.count("tl.dot(")
    assert for_target(source, "amd", FIX / "attention_fp32.py") == source  # AMD's default is "ieee"


def test_half_precision_problems_keep_tritons_default_on_nvidia() -> None:
    # fp16/bf16 operands: Triton 3.6 runs an "ieee" dot on FMA units (a GEGLU draft 836 us vs 30.6 us)
    half = FIX.parents[1] / "search" / "fixtures_drafting" / "swiglu_sliced.py"
    assert not computes_in_float32(half) and computes_in_float32(FIX / "matmul_fp32.py")
    nvidia = draft_seeds(half, inductor=False, target="nvidia")[0][0].source
    assert "tl.dot(" in nvidia and IEEE not in nvidia
    assert not computes_in_float32(FIX / "no_such_problem.py")


def test_exact_dots_edits_calls_in_any_spelling() -> None:
    source = (
        'x = "é"; acc += tl.dot(a, b)\n'
        "acc = tl.dot(p.to(v.dtype), v,\n             acc)\n"
        's = tl.dot(q, tl.trans(k), input_precision="tf32")\n'
        "t = tl.dot(a,\n   b,\n)\n"
        "u = tl.dot(tl.dot(a, b), c)\n"
        "w = np.dot(a, b)\n"
    )
    out = exact_dots(source)
    compile(out, "out", "exec")
    assert out.count(IEEE) == 5  # every tl.dot but the one stating tf32; np.dot untouched
    assert 'input_precision="tf32"' in out and "np.dot(a, b)\n" in out
    assert exact_dots(out) == out
    assert exact_dots("def broken(:\n    tl.dot(a, b)\n") == "def broken(:\n    tl.dot(a, b)\n"
    assert keep_exact_dots("tl.dot(a, b)", "y = tl.dot(c, d)") == "y = tl.dot(c, d)"
    assert keep_exact_dots(out, "y = tl.dot(c, d)") == f"y = tl.dot(c, d, {IEEE})"


@pytest.mark.parametrize("problem", ["matmul_fp32", "conv_fp32"])
def test_gpu_rewrites_keep_a_drafts_exact_dots(problem: str) -> None:
    nvidia = draft_seeds(FIX / f"{problem}.py", inductor=False, target="nvidia")[0][0].source
    assert states_exact_dots(nvidia)
    moves = gpu_mutations(nvidia)
    assert moves, f"no GPU rewrite applies to the {problem} draft"
    for move in moves[:3]:
        src = move.apply(nvidia)
        assert src != nvidia and src.count("tl.dot(") == src.count(IEEE) > 0, move.name


def test_half_precision_rewrites_state_no_precision() -> None:
    # an fp16 convolution's GPU rewrites keep Triton's default (fp16 "ieee" dots are FMA on Triton 3.6)
    nvidia = draft_seeds(FIX / "conv_fp16.py", inductor=False, target="nvidia")[0][0].source
    moves = gpu_mutations(nvidia)
    assert moves and IEEE not in nvidia
    assert all(IEEE not in move.apply(nvidia) for move in moves[:2])


@pytest.mark.parametrize(
    ("name", "exact"), [("embedding_bag_mean_fp32", True), ("embedding_bag_sum_fp16", False)]
)
def test_the_offline_operators_moves_state_exact_dots_on_float32_problems_for_nvidia(
    name: str, exact: bool
) -> None:
    # the bag move writes its kernel from the template's text: on an fp32 problem its dot must be exact
    # (TF32 put every fp32 bag candidate of an H100 search ~1e-3 off), on an fp16 one Triton's default
    from types import SimpleNamespace

    from kegen.search.operators.offline import OfflineOperator
    from kegen.suites import find_suite

    problem = next(p for p in find_suite("production").problems if p.name == name)
    seed = problem.seed_path.read_text()

    def bag_moves(target: str) -> list[str]:
        info = SimpleNamespace(target=target, platform=target, path=problem.problem_path)
        ctx = SimpleNamespace(parent_code=seed, problem=info, profile=None)
        moves = OfflineOperator.candidates(OfflineOperator.__new__(OfflineOperator), ctx)
        return [m.apply(seed) for m in moves if m.family == "embedding_bag"]

    (nvidia,) = bag_moves("nvidia")
    assert nvidia.count("tl.dot(") == 1 and (IEEE in nvidia) == exact
    assert all(IEEE not in src for src in bag_moves("mtia"))  # mtia's Triton is exact by default


def test_launches_are_recorded_on_the_path_a_gpu_takes(tmp_path: Path) -> None:
    """A grouped convolution's draft picks its kernel by device: the weight-stationary one for host
    tensors (mtia), the row kernel on a GPU; the check compiles the one a GPU runs."""
    _needs_nvidia_compiler()
    problem = FIX / "conv_grouped_fp16.py"
    source = draft_seeds(problem, inductor=False, target="mtia")[0][0].source
    assert "kegen_conv_grouped_ws_kernel" in source and "x.is_cuda" in source
    candidate = tmp_path / "grouped.py"
    candidate.write_text(source)
    results = compile_candidate(problem, candidate)
    assert [r.kernel for r in results] == ["kegen_conv_grouped_kernel"]
    assert not results[0].error, results[0].error
