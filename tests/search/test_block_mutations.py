"""Block-size mutations that follow the value to its binding and keep the launch grid consistent."""

from __future__ import annotations

import ast
import importlib.util
import textwrap
from pathlib import Path

import pytest
import torch

from kegen.search.config import OperatorConfig
from kegen.search.operators.context import Attempt, Diagnosis, OperatorContext, ProblemInfo
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.blocks import (
    block_mutations,
    find_blocks,
    set_block,
    tile_mutations,
)
from kegen.search.operators.offline import OfflineOperator
from kegen.search.store import Node, code_hash

SUITE = Path(__file__).resolve().parents[2] / "kegen" / "suites" / "default"
GEMM_SEED = (SUITE / "gemm" / "seed.py").read_text()
MLP_SEED = (SUITE / "mlp_bias_relu" / "seed.py").read_text()


def _grid_of(source: str) -> str:
    """The right-hand side of the launcher's `grid = ...` assignment."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "grid":
            return ast.unparse(node.value)
    raise AssertionError("no grid assignment")


def test_gemm_seed_blocks_bound_to_a_tuple_of_locals_are_found() -> None:
    sites = {s.param: s for s in find_blocks(GEMM_SEED)}
    assert set(sites) == {"BLOCK_M", "BLOCK_N", "BLOCK_K"}
    assert (sites["BLOCK_M"].var, sites["BLOCK_M"].slot, sites["BLOCK_M"].axis) == ("BM", 0, 0)
    assert (sites["BLOCK_N"].var, sites["BLOCK_N"].axis) == ("BN", 1)
    assert sites["BLOCK_K"].axis is None and sites["BLOCK_K"].value == 32


def test_block_mutations_fire_on_the_gemm_seed() -> None:
    names = {m.name for m in block_mutations(GEMM_SEED)}
    assert {"BLOCK_M=64@matmul_kernel", "BLOCK_N=128@matmul_kernel", "BLOCK_K=64@matmul_kernel"} <= names
    tiles = {m.name: m for m in tile_mutations(GEMM_SEED)}
    assert set(tiles) == {"tile=64x64@matmul_kernel"}  # 16x16 would waste the 32x32 DPE tile
    new = tiles["tile=64x64@matmul_kernel"].apply(GEMM_SEED)
    assert "BM, BN, BK = (64, 64, 32)" in new and _grid_of(new) == _grid_of(GEMM_SEED)


def test_literal_blocks_rewrite_only_their_own_grid_axis() -> None:
    sites = {s.param: s for s in find_blocks(MLP_SEED)}
    assert _grid_of(MLP_SEED) == "(triton.cdiv(M, 32), triton.cdiv(N, 32))"
    new = set_block(MLP_SEED, sites["BLOCK_N"], 128)
    assert _grid_of(new) == "(triton.cdiv(M, 32), triton.cdiv(N, 128))" and "BLOCK_N=128" in new
    new = set_block(MLP_SEED, sites["BLOCK_K"], 64)  # the reduction block tiles no program axis
    assert _grid_of(new) == _grid_of(MLP_SEED) and "BLOCK_K=64" in new and "BLOCK_M=32" in new


def test_a_grid_that_cannot_follow_is_refused() -> None:
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)

        def launch(x, n, programs):
            k[(programs,)](x, n, BLOCK=64)
    """)
    (site,) = find_blocks(src)
    assert site.axis == 0
    with pytest.raises(MutationError, match="grid axis 0"):
        set_block(src, site, 128)
    assert block_mutations(src) == []


def _ctx(code: str, siblings: tuple[str, ...] = ()) -> OperatorContext:
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=code, code_hash=code_hash(code), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target="mtia", island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    return OperatorContext(
        problem=ProblemInfo(path=SUITE / "gemm" / "problem.py", source="", op_class="gemm"),
        parent=node,
        parent_code=code,
        parent_eval=None,
        phase="optimize",
        diagnosis=Diagnosis(bound="memory", stalls=(("CORE:end_wait_DMA", 0.9),)),
        failure=None,
        attempts=[Attempt(i, d, "ok", 1.0, "sibling") for i, d in enumerate(siblings)],
        knowledge=[],
    )


def test_offline_operator_uses_grid_following_block_mutations() -> None:
    op = OfflineOperator(OperatorConfig(), seed=0)
    block_m = [m for m in op.candidates(_ctx(MLP_SEED)) if m.name == "BLOCK_M=64@linear_kernel"]
    assert len(block_m) == 1  # the knob version (which left the grid at 32) is replaced
    assert "triton.cdiv(M, 64)" in block_m[0].apply(MLP_SEED)
    first = op.propose(_ctx(GEMM_SEED))
    assert first.meta["family"] == "block_up" and first.code is not None
    assert find_blocks(first.code) != find_blocks(GEMM_SEED)


def test_mutated_gemm_seed_runs_correctly_on_the_simulator(tmp_path: Path) -> None:
    from lowering.backend import driver

    tile = next(m for m in tile_mutations(GEMM_SEED) if m.name == "tile=64x64@matmul_kernel")
    src = set_block(tile.apply(GEMM_SEED), find_blocks(GEMM_SEED)[2], 64)  # and BLOCK_K 32 -> 64
    path = tmp_path / "mutated_gemm.py"  # Triton reads a jit function's source from its file
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("mutated_gemm", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    a, b = torch.randn(96, 80), torch.randn(80, 72)  # ragged: masks and the cdiv grid both matter
    driver.clear_launch_history()
    out = mod.ModelNew()(a, b)
    torch.testing.assert_close(out, a @ b, rtol=1e-3, atol=1e-3)
    assert driver.last_launch().programs == 2 * 2
    assert driver.launch_history()[-1].grid == (2, 2, 1)
