"""Fast in-process tests of the evaluator's parts: results, config, checker, cheat checks, roofline,
profile format, loader errors and source lines."""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch
from eval_helpers import candidate, problem

from kegen.eval import EvalConfig, EvalResult, ProblemError, Status
from kegen.eval.errors import CandidateError
from kegen.eval.loader import load_candidate, load_problem
from kegen.eval.profile import KernelStat, Profile, UnitStat
from kegen.eval.sandboxed import guards
from kegen.eval.sandboxed.runner import classify
from kegen.eval.timing import TimingStats
from kegen.eval.trusted import checks
from kegen.eval.trusted.checker import compare_outputs, same_values
from kegen.eval.trusted.roofline import MachinePeak, problem_roofline
from kegen.profiling.render import terminal


def test_result_round_trips_through_json_and_drops_infinities() -> None:
    r = EvalResult(
        status=Status.OK,
        max_abs_error=1e-6,
        times={"candidate": 2e-6, "eager": 4e-6},
        speedups={"eager": 2.0, "roofline": 0.5},
        speedup=2.0,
        fitness=2.0,
        seeds=[42, 43],
        max_rel_error=math.inf,
    )
    data = json.loads(json.dumps(r.to_dict()))
    assert data["status"] == "ok" and data["max_rel_error"] is None
    back = EvalResult.from_dict(data)
    assert back.status is Status.OK and back.speedups == {"eager": 2.0, "roofline": 0.5}
    text = back.verdict_text()
    assert "verdict: OK" in text and "vs eager" in text and "roofline fraction" in text


def test_config_validates_and_picks_tolerances_by_dtype() -> None:
    cfg = EvalConfig()
    assert cfg.tolerances("float32") == (1e-4, 1e-4)
    assert cfg.tolerances("bfloat16") == (1e-2, 1e-2)
    assert EvalConfig(atol=0.5).tolerances("float16") == (0.5, 1e-2)
    with pytest.raises(ValueError, match="unknown target"):
        EvalConfig(target="tpu")
    assert EvalConfig.from_dict(EvalConfig(allow_ops=("aten.mm",)).to_dict()).allow_ops == ("aten.mm",)


def test_checker_reports_worst_error_and_where() -> None:
    ref = torch.zeros(4, 5)
    cand = ref.clone()
    cand[2, 3] = 0.5
    cmp = compare_outputs([ref], [cand], EvalConfig())
    assert not cmp.ok and cmp.worst_index == [2, 3] and cmp.max_abs_error == pytest.approx(0.5)
    assert "index (2, 3)" in cmp.message
    cand[2, 3] = 5e-5  # within fp32 atol
    assert compare_outputs([ref], [cand], EvalConfig()).ok


def test_checker_requires_nan_inf_agreement_shape_and_dtype() -> None:
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs([ref], [ref.clone()], EvalConfig()).ok
    assert "NaN/Inf" in compare_outputs([ref], [torch.tensor([1.0, 0.0, float("inf")])], EvalConfig()).message
    assert (
        "NaN/Inf"
        in compare_outputs([ref], [torch.tensor([1.0, float("nan"), -float("inf")])], EvalConfig()).message
    )
    assert "shape" in compare_outputs([ref], [ref[:2]], EvalConfig()).message
    assert "dtype" in compare_outputs([ref], [ref.double()], EvalConfig()).message


def test_fp16_outputs_get_the_looser_tolerance() -> None:
    ref = torch.ones(8, dtype=torch.float16)
    assert compare_outputs([ref], [ref + 0.005], EvalConfig()).ok
    assert not compare_outputs([ref.float()], [ref.float() + 0.005], EvalConfig()).ok


def test_aliasing_and_mutation_checks() -> None:
    a, b = torch.randn(16), torch.randn(16)
    ref_out = [a + b]
    assert checks.check_aliasing([ref_out[0][:]], [a, b], ref_out, [], set()) is not None
    assert "aliases input 0" in checks.check_aliasing([a.view(4, 4)], [a, b], None, [], set())
    assert checks.check_aliasing([a.view(4, 4)], [a, b], None, [], {0}) is None  # the reference does it too
    pristine = [a.clone(), b.clone()]
    b.add_(1)
    assert "input 1" in checks.check_mutation(pristine, [a, b], set())
    assert checks.check_mutation(pristine, [a, b], {1}) is None


def test_precision_check_flags_fp16_valued_float32_outputs_only() -> None:
    x = torch.randn(1024)
    assert checks.check_precision([x], [x.clone()]) is None
    assert "float16" in checks.check_precision([x], [x.half().float()])
    assert "lowered the precision" in checks.check_precision([x], [x.bfloat16().float()])
    ints = torch.arange(1024.0)  # integer-valued reference: exactly representable, must not be flagged
    assert checks.check_precision([ints], [ints.clone()]) is None


def test_cached_result_check_needs_differing_references() -> None:
    r1, r2, c = [torch.ones(4)], [torch.zeros(4)], [torch.ones(4)]
    assert checks.check_cached([(r1, c)], r2, c, same_values) is not None
    assert (
        checks.check_cached([(r1, c)], r1, c, same_values) is None
    )  # constant problem: same output is right


def test_roofline_check_and_problem_roofline() -> None:
    assert checks.check_roofline(1e-6, 1e-5, 0.9) is not None
    assert checks.check_roofline(2e-5, 1e-5, 0.9) is None
    peak = MachinePeak("toy", dram_bw=1e9, peak_flops={"float32": 1e12})
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    rf = problem_roofline(_MatMul(), [a, b], a @ b, peak)
    assert rf.flops == 2 * 64 * 32 * 16
    assert rf.bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4
    assert rf.time_s == pytest.approx(max(rf.bytes / 1e9, rf.flops / 1e12)) and rf.bound == "memory"


class _MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class _Bags(torch.nn.Module):
    """An embedding bag with no `roofline_bytes` of its own (a user's problem, a tuned model's op)."""

    def __init__(self) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(10_000, 16, mode="sum")

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, offsets)


class _TableAndSum(torch.nn.Module):
    def forward(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return table[ids] + table.sum()  # the table is also read whole: counted whole


def test_a_gathers_table_counts_the_rows_it_touches() -> None:
    """Without the problem's own minimum, a gathered table counted whole made the roofline 40x too
    high for these bags, and a correct kernel was judged faster than the hardware (cheat_detected)."""
    peak = MachinePeak("toy", dram_bw=1e9, peak_flops={"float32": 1e12})
    ids = torch.tensor([3, 7, 7, 9000, 3, 12])
    offsets = torch.tensor([0, 2, 4])
    model = _Bags()
    rf = problem_roofline(model, [ids, offsets], model(ids, offsets), peak)
    rows = 4 * 16 * 4  # distinct ids 3, 7, 12, 9000; 16 fp32 columns
    assert rf.bytes == rows + ids.numel() * 8 + offsets.numel() * 8 + 3 * 16 * 4
    table = torch.randn(500, 8)
    rf = problem_roofline(_TableAndSum(), [table, ids[:2]], _TableAndSum()(table, ids[:2]), peak)
    assert rf.bytes == table.numel() * 4 + 2 * 8 + 2 * 8 * 4
    with torch.no_grad():  # index_select on dim 0 and advanced indexing count the same rows
        small = ids % 500  # 3, 7, 7, 0, 3, 12: four distinct rows
        for gather in (lambda t, i: t.index_select(0, i), lambda t, i: t[i]):
            m = _Fn(gather)
            assert problem_roofline(m, [table, small], m(table, small), peak).bytes == 4 * 8 * 4 + 6 * 8 + 6 * 8 * 4


class _Fn(torch.nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs)


def test_op_guard_flags_library_ops_but_not_allocation_or_views() -> None:
    x = torch.randn(8, 8)
    with guards.OpGuard((), None) as guard:
        y = torch.empty_like(x).view(64)
        y.copy_(x.reshape(64))
    assert guard.message() is None
    with guards.OpGuard((), None) as guard:
        torch.softmax(x, dim=1)
    assert "aten._softmax" in guard.message()
    with guards.OpGuard(("aten._softmax",), None) as guard:
        torch.softmax(x, dim=1)
    assert guard.message() is None


def test_timing_stats_median_and_spread() -> None:
    s = TimingStats.from_samples([1.0, 2.0, 3.0, 4.0, 100.0], "test")
    assert s.median_s == 3.0 and s.min_s == 1.0 and s.runs == 5 and s.spread > 0


def test_profile_round_trip_and_text() -> None:
    prof = Profile(
        target="mtia",
        device="mtia-2i",
        time_s=2e-6,
        kernels=[KernelStat("add_kernel", 1, 2e-6, 1.0)],
        units=[UnitStat("DMA", 100.0, 0.5)],
        metrics={"achieved_dram_bw": 1e11, "dram_bw_pct": 50.0},
        stalls={"DMA:unit_busy": 10.0},
        roofline={"bound": "memory", "bytes": 1000, "flops": 0, "time_s": 1e-6, "fraction": 0.5},
    )
    back = Profile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert back == prof
    text = terminal(back)
    assert "add_kernel" in text and "DMA" in text and "memory-bound" in text and "50.0%" in text


def test_loader_names_what_is_missing(tmp_path) -> None:
    with pytest.raises(ProblemError, match="lacks get_inputs"):
        load_problem(problem("broken_problem"))
    p = load_problem(problem("vector_add"))
    assert p.size_constants == {"N": 8192}
    with pytest.raises(CandidateError, match="neither class ModelNew"):
        load_candidate(candidate("no_model_new"))
    bad = tmp_path / "bad.py"
    bad.write_text("class ModelNew:\n    def forward(self)\n        pass\n")
    with pytest.raises(CandidateError) as exc:
        load_candidate(bad)
    assert exc.value.status == "compile_error" and exc.value.source_line == "bad.py:2"


def test_triton_compile_error_maps_to_compile_error_at_the_kernel_line() -> None:
    """Compiles the fixture's kernel for an NVIDIA target (no GPU needed) to get a real CompilationError."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cls = load_candidate(candidate("vector_add_compile_error"))
    kernel = sys.modules[cls.__module__].add_kernel
    src = ASTSource(
        kernel,
        {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        constexprs={"BLOCK": 1024},
    )
    with pytest.raises(Exception) as info:
        triton.compile(src, target=GPUTarget("cuda", 90, 32))
    err = classify(info.value, candidate("vector_add_compile_error"), "compile")
    assert err.status == "compile_error"
    assert "no_such_function" in err.message
