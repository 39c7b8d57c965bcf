"""Whole-plan moves of the offline operator (kegen.search.operators.mutations.plans): sized from the
parent's measured grid, several knobs at once, chosen first when the diagnosis asks for them."""

from __future__ import annotations

import ast
from pathlib import Path

from kegen.profiling.schema import LaunchStat, Profile
from kegen.search.config import OperatorConfig
from kegen.search.operators.context import Diagnosis, OperatorContext, ProblemInfo
from kegen.search.operators.mutations.blocks import BlockSite, find_blocks
from kegen.search.operators.mutations.plans import fill_tile, plan_mutations
from kegen.search.operators.offline import OfflineOperator
from kegen.search.store import Node, code_hash

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"
GEMM = (PRODUCTION / "gemm_fp16_2048" / "seed.py").read_text()  # 64x64x32 tiles


def _profile(kernel: str, programs: int, pes: int = 64, grid: list[int] | None = None) -> Profile:
    grid = grid or [programs, 1, 1]
    launch = LaunchStat(kernel=kernel, grid=grid, time_s=1e-4, programs=programs, pes_total=pes)
    return Profile(target="mtia", device="mtia-2i", launches=[launch])


def _sites(m: int, n: int) -> list[BlockSite]:
    return [BlockSite("k", 0, "BLOCK_M", m, axis=0), BlockSite("k", 0, "BLOCK_N", n, axis=1)]


def test_fill_keeps_every_pe_busy() -> None:
    grow = fill_tile(_sites(64, 64), programs=1024, pes=64, cap=256, floor=32)
    assert [v for _, v in grow] == [256, 256]  # 1024 -> 64 programs
    capped = fill_tile(_sites(64, 64), programs=1024, pes=64, cap=128, floor=32)
    assert [v for _, v in capped] == [128, 128]  # 256 programs: the cap stops it
    odd = fill_tile(_sites(64, 64), programs=512, pes=64, cap=256, floor=32)
    assert sorted(v for _, v in odd) == [128, 256]  # 512 -> 64 programs, one axis grown twice
    shrink = fill_tile(_sites(256, 256), programs=16, pes=64, cap=256, floor=32)
    assert [v for _, v in shrink] == [128, 128]  # 16 -> 64 programs
    assert fill_tile(_sites(64, 64), programs=100, pes=64, cap=256, floor=32) == []  # already filled


def _values(src: str) -> dict[str, int]:
    return {s.param: s.value for s in find_blocks(src)}


def test_gemm_plan_sets_tile_reduction_block_and_launch_options() -> None:
    all_muts = plan_mutations(GEMM, _profile("matmul_kernel", 1024, grid=[32, 32, 1]))
    muts = {m.name.split("=")[0]: m for m in all_muts if "cache" not in m.name}
    assert {"fill", "plan256", "plan128"} <= set(muts)
    cache = next(m for m in all_muts if m.name.startswith("plan256") and "'cache'" in m.name)
    cached = cache.apply(GEMM)  # the variant with operands in DRAM (the default SRAM mode)
    assert "resident" not in cached and "num_stages=2" in cached
    src = muts["plan256"].apply(GEMM)
    assert _values(src) == {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64}
    launch = next(
        n
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and "matmul_kernel" in ast.unparse(n.func)
    )
    kws = {k.arg: ast.literal_eval(k.value) for k in launch.keywords if k.arg in ("num_stages", "sram_mode")}
    assert kws == {"num_stages": 2, "sram_mode": "resident"}
    assert "triton.cdiv(M, BM)" in src  # the grid still follows the blocks
    assert _values(muts["plan128"].apply(GEMM)) == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    assert _values(muts["fill"].apply(GEMM))["BLOCK_K"] == 32  # fill changes the tile only


def test_no_plan_without_a_measured_launch_of_the_kernel() -> None:
    assert plan_mutations(GEMM, None) == []
    assert plan_mutations(GEMM, _profile("other_kernel", 1024)) == []


def test_a_finished_plan_is_not_proposed_again() -> None:
    muts = plan_mutations(GEMM, _profile("matmul_kernel", 1024, grid=[32, 32, 1]))
    plan = next(m for m in muts if m.name.startswith("plan256") and "resident" in m.name)
    done = plan.apply(GEMM)
    again = [m.name for m in plan_mutations(done, _profile("matmul_kernel", 64, grid=[8, 8, 1]))]
    assert not any("resident" in n for n in again) and not any(n.startswith("fill") for n in again)


def test_the_operator_proposes_the_plan_first_for_a_memory_bound_gemm() -> None:
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=GEMM, code_hash=code_hash(GEMM), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target="mtia", island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    ctx = OperatorContext(
        problem=ProblemInfo(path=PRODUCTION / "gemm_fp16_2048" / "problem.py", source="", op_class="gemm"),
        parent=node,
        parent_code=GEMM,
        parent_eval=None,
        phase="optimize",
        diagnosis=Diagnosis(bound="memory"),
        failure=None,
        attempts=[],
        knowledge=[],
        profile=_profile("matmul_kernel", 1024, grid=[32, 32, 1]),
    )
    first = OfflineOperator(OperatorConfig(), seed=0).propose(ctx)
    assert first.meta["family"] == "plan" and first.code is not None
    assert _values(first.code)["BLOCK_M"] >= 128
