"""Plans sized to the local store (mutations.footprint) and to the measured grid (fill per axis).

The footprint figures asserted here were checked against the mtia compiler (LocalStoreOverflowError or
not, 384 KiB on mtia-2i) on the production seeds: a GELU epilogue holds two float32 output tiles (bias
and ReLU update in place), a conv's loop nest one accumulator per carrying loop level, the operand ring
`num_stages` copies of each operand.
"""

from __future__ import annotations

from pathlib import Path

from kegen.profiling.schema import LaunchStat, Profile
from kegen.search.operators.mutations.blocks import BlockSite, find_blocks
from kegen.search.operators.mutations.footprint import dot_footprint, local_store_bytes
from kegen.search.operators.mutations.plans import fill_tile, plan_mutations

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"
CAPACITY = 393216  # mtia-2i


def _seed(name: str) -> str:
    return (PRODUCTION / name / "seed.py").read_text()


def _profile(kernel: str, grid: list[int]) -> Profile:
    programs = grid[0] * grid[1] * grid[2]
    launch = LaunchStat(kernel=kernel, grid=grid, time_s=1e-4, programs=programs, pes_total=64)
    return Profile(target="mtia", device="mtia-2i", launches=[launch])


def _fits(name: str, kernel: str, stages: int, **blocks: int) -> bool:
    need = dot_footprint(_seed(name), kernel, blocks, stages)
    assert need is not None
    return need <= CAPACITY


def test_footprint_matches_the_compiler_on_gemm_epilogue_and_conv_nests() -> None:
    gelu = ("linear_bias_gelu_bf16", "linear_gelu_kernel")
    assert _fits(*gelu, 2, BLOCK_M=256, BLOCK_N=128, BLOCK_K=64)
    assert not _fits(*gelu, 2, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64)  # acc + one GELU temporary
    relu = ("linear_bias_relu_fp16", "linear_relu_kernel")  # bias and ReLU are in place
    assert _fits(*relu, 2, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64)
    gemm = ("gemm_bf16_4096", "matmul_kernel")
    assert _fits(*gemm, 2, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64)  # exactly the capacity
    assert not _fits(*gemm, 2, BLOCK_M=256, BLOCK_N=256, BLOCK_K=128)
    assert not _fits(*gemm, 3, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64)
    conv1d = ("conv1d_fp16", "conv1d_kernel")
    assert _fits(*conv1d, 2, BLOCK_CO=128, BLOCK_L=256, BLOCK_CI=64)
    assert not _fits(*conv1d, 2, BLOCK_CO=256, BLOCK_L=256, BLOCK_CI=64)  # two loop levels carry acc
    conv2d = ("conv2d_fp16", "conv2d_kernel")
    assert _fits(*conv2d, 2, BLOCK_CO=128, BLOCK_P=128, BLOCK_CI=64)
    assert not _fits(*conv2d, 2, BLOCK_CO=128, BLOCK_P=256, BLOCK_CI=64)  # three levels


def test_footprint_is_unknown_when_the_accumulator_shape_is_not_in_blocks() -> None:
    # attention's accumulator is BLOCK_M x BLOCK_D, and BLOCK_D is computed by the launcher
    assert (
        dot_footprint(_seed("attention_fwd_fp16"), "attention_kernel", {"BLOCK_M": 64, "BLOCK_N": 64}, 2)
        is None
    )
    assert dot_footprint(_seed("softmax_fp32"), "softmax_kernel", {"BLOCK": 1024}, 1) is None  # no dot
    assert local_store_bytes("mtia-2i") == CAPACITY
    assert local_store_bytes("mtia-2i", dual_core=True) == CAPACITY // 2


def _values(src: str) -> dict[str, int]:
    return {s.param: s.value for s in find_blocks(src)}


def test_plans_for_a_gelu_epilogue_fit_the_local_store() -> None:
    src = _seed("linear_bias_gelu_bf16")
    muts = plan_mutations(src, _profile("linear_gelu_kernel", [64, 32, 1]))  # 4096x2048 at 64x64
    plans = [m for m in muts if m.name.startswith("plan256")]
    assert plans, [m.name for m in muts]
    blocks = _values(plans[0].apply(src))
    assert blocks == {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}  # not 256x256 (overflows)
    for m in muts:
        out = m.apply(src)
        need = dot_footprint(out, "linear_gelu_kernel", _values(out), 2)
        assert need is not None and need <= CAPACITY, m.name


def test_fill_stops_at_an_axis_with_one_program() -> None:
    sites = [BlockSite("k", 0, "BLOCK_CO", 32, axis=1), BlockSite("k", 0, "BLOCK_L", 64, axis=2)]
    # conv1d at size: grid (batch 8, C_out/32 = 8, L/64 = 32): BLOCK_CO stops at 256 = C_out
    grown = dict((s.param, v) for s, v in fill_tile(sites, 2048, 64, 256, 32, grid=(8, 8, 32)))
    assert grown == {"BLOCK_CO": 256, "BLOCK_L": 256}  # 8 x 1 x 8 programs
    narrow = dict((s.param, v) for s, v in fill_tile(sites, 2048, 64, 256, 32, grid=(8, 1, 256)))
    assert "BLOCK_CO" not in narrow and narrow["BLOCK_L"] == 256  # one program on the C_out axis
    # the measured grid's counts follow each halving (ceiling): 49 pixel blocks -> 25 -> 13
    pix = [BlockSite("k", 0, "BLOCK_P", 64, axis=2)]
    assert [v for _, v in fill_tile(pix, 392, 64, 512, 32, grid=(8, 1, 49))] == [256]  # 8 x 13 >= 64


def test_conv_plans_keep_the_grid_and_fit() -> None:
    src = _seed("conv2d_fp16")
    muts = plan_mutations(src, _profile("conv2d_kernel", [8, 4, 49]))
    assert muts
    for m in muts:
        out = m.apply(src)
        vals = _values(out)
        assert (
            f"triton.cdiv(c_out, {vals['BLOCK_CO']})" in out
            and f"triton.cdiv(h * w_, {vals['BLOCK_P']})" in out
        )
        need = dot_footprint(out, "conv2d_kernel", vals, 2)
        assert need is not None and need <= CAPACITY, m.name


def test_under_dual_core_the_plan_lowers_its_reduction_block_and_the_knob_is_dropped() -> None:
    from kegen.search.operators.mutations.knobs import knob_mutations
    from kegen.search.operators.mutations.plans import _set_options

    seed = _seed("conv1d_fp16")
    dual = _set_options(seed, "conv1d_kernel", {"dual_core": True})  # half the local store per program
    muts = plan_mutations(dual, _profile("conv1d_kernel", [8, 4, 16]))  # conv1d at half size
    plan = next(m for m in muts if m.name.startswith("plan256"))
    vals = _values(plan.apply(dual))
    # 128x128 with BLOCK_CI 64 and two stages overflows half the store (measured: 197632 B > 196608 B)
    assert vals == {"BLOCK_CO": 128, "BLOCK_CI": 32, "BLOCK_L": 128}
    big = plan_mutations(seed, _profile("conv1d_kernel", [8, 4, 16]))
    best = next(m for m in big if m.name.startswith("plan256")).apply(seed)
    assert _values(best)["BLOCK_CI"] == 64  # single core: the full reduction block fits
    names = [m.name for m in knob_mutations(best)]
    assert "dual_core=True@conv1d_kernel#0" not in names and "num_stages=3@conv1d_kernel#0" in names
    assert "dual_core=True@conv1d_kernel#0" in [m.name for m in knob_mutations(seed)]


def test_block_steps_that_would_overflow_are_not_offered() -> None:
    from kegen.search.operators.mutations.blocks import block_mutations, set_blocks, tile_mutations

    seed = _seed("linear_bias_gelu_bf16")
    sites = {s.param: s for s in find_blocks(seed)}
    big = set_blocks(seed, [(sites["BLOCK_M"], 256), (sites["BLOCK_N"], 128)])  # 256x128: fits
    names = {m.name.split("@")[0] for m in block_mutations(big) + tile_mutations(big)}
    assert "BLOCK_N=256" not in names and "tile=512x256" not in names  # acc + GELU temporary: 512 KiB
    assert {"BLOCK_K=64", "BLOCK_M=128", "tile=128x64"} <= names
