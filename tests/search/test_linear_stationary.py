"""The mtia weight-stationary rewrite of small-K dot kernels (templates/linear_stationary.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.gemm_plan import gelu_sigmoid
from kegen.search.operators.templates.linear_stationary import (
    FALLBACK,
    HELPER_SOURCE,
    rewrite,
    stationary_mutations,
)

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
        assert (
            "kegen_k_chunks, kegen_block_k, kegen_block_m, kegen_block_n = _kegen_stationary_plan(K, " in out
        )
        assert (
            "BLOCK_K=kegen_block_k" in out
            and "triton.cdiv(M, kegen_block_m)" in out
            and f"def {kernel}_k3(" in out
            and f"def {kernel}_k5(" in out
        )
        assert stationary_mutations(out) == []  # not rewritten twice
    with pytest.raises(MutationError, match="no jit kernel"):
        rewrite(_seed("softmax_fp32"), "linear_gelu_kernel")
    assert stationary_mutations(_seed("softmax_fp32")) == []


def _plan_helper() -> Callable[..., tuple[int, int, int, int]]:
    scope: dict[str, Any] = {}
    exec(HELPER_SOURCE, scope)  # noqa: S102 - the helper as the move writes it into candidates
    return scope["_kegen_stationary_plan"]  # type: ignore[no-any-return]


def test_k_is_cut_into_the_chunks_that_pad_it_least() -> None:
    plan = _plan_helper()
    expected = {768: (3, 256), 512: (1, 512), 640: (5, 128), 1536: (3, 512), 48: (3, 16), 1000: (1, 1024)}
    for k, want in expected.items():
        assert plan(k, 16, 16, 2, 1 << 30)[:2] == want, k
    assert plan(8, 16, 16, 2, 1 << 30)[:2] == (1, 16)  # a dot's K is at least 16
    for k in range(1, 3000, 7):
        count, block, _, _ = plan(k, 16, 16, 2, 1 << 30)
        assert count * block >= k and block & (block - 1) == 0 and block >= 16
        assert count * block <= max(16, 1 << (k - 1).bit_length())  # never more padding than one block


def test_the_tile_shrinks_until_the_stationary_blocks_fit() -> None:
    plan = _plan_helper()
    cap = 384 * 1024
    assert plan(512, 32, 128, 2, cap) == (1, 512, 32, 128)  # fits as asked
    assert plan(768, 32, 128, 2, cap) == (3, 256, 32, 128)  # 336 KiB of weights and inputs
    assert plan(768, 64, 64, 2, cap) == (3, 256, 32, 64)  # the longer side (M on ties) halved first
    assert plan(768, 64, 64, 2, cap, shrink=False) == (3, 256, 0, 0)
    assert plan(1 << 16, 64, 64, 2, cap)[2:] == (0, 0)  # nothing fits: the original kernel
    assert plan(2048, 32, 128, 2, cap)[2:] == (0, 0)  # only tiles below 32x64 would: the original
    assert plan(2048, 16, 32, 2, cap) == (1, 2048, 16, 32)  # a tile asked for below them is taken as is
    for k in (96, 700, 1024, 2000):
        for bm, bn in ((16, 16), (32, 128), (128, 64), (64, 256)):
            count, block, m, n = plan(k, bm, bn, 4, cap)
            if m:
                assert m <= bm and n <= bn and count * block * (n + 3 * m) * 4 + m * n * 16 <= cap


def test_the_unrolled_k_chunks_load_their_weights_once() -> None:
    out = rewrite(_seed("linear_bias_gelu_bf16"), "linear_gelu_kernel")
    k3 = out[out.index("def linear_gelu_kernel_k3(") : out.index("def linear_gelu_kernel_k5(")]
    head, loop = k3.split("for kegen_m_tile in range(", 1)
    for i in range(3):
        assert f"k_c{i} = {i} * BLOCK_K" in head and f"wt_c{i} = tl.load(" in head  # hoisted weights
        assert f"tl.dot(x_c{i}, wt_c{i}" in loop and f"x_c{i}_next = tl.load(" in loop  # pipelined inputs
    assert "wt_c0 = tl.load(" not in loop


def test_the_hand_pipelined_kernels_drop_the_parents_stages_and_second_core() -> None:
    """The M loop is software-pipelined in the text: stages on top would double its input tiles, and
    a second core would halve the local store its fit was computed for."""
    seed = _seed("linear_bias_gelu_bf16").replace("BLOCK_K=BK)", "BLOCK_K=BK, num_stages=2, dual_core=True)")
    assert "num_stages=2" in seed
    launches = [
        line for line in rewrite(seed, "linear_gelu_kernel").splitlines() if "_kernel" in line and "[" in line
    ]
    assert len(launches) == 7 and [line for line in launches if "num_stages=2" in line] == launches[-1:]
    assert [line for line in launches if "dual_core=True" in line] == launches[-1:]
    assert "linear_gelu_kernel_tiled[" in launches[-1]


def test_a_kernel_whose_m_program_id_is_read_elsewhere_is_refused() -> None:
    src = _seed("linear_bias_gelu_bf16").replace("acc = 0.5 * acc", "acc = 0.5 * (acc + pid_m * 0)")
    assert src != _seed("linear_bias_gelu_bf16")
    with pytest.raises(MutationError, match="read beyond the M offsets"):
        rewrite(src, "linear_gelu_kernel")


@pytest.mark.parametrize(
    ("batch", "in_f", "out_f", "kernel"),
    [
        ("200", "48", "2100", "linear_gelu_kernel_k3_bal"),  # 17 N tiles: 119 items on 64 PEs, runs cross N
        ("37", "60", "80", "linear_gelu_kernel"),  # one M tile per program, ragged M, N and K (one block)
        ("37", "1024", "24", "linear_gelu_kernel"),  # 32x128 would not fit: 32x64 stays
        ("37", "4096", "24", "linear_gelu_kernel_tiled"),  # no tile fits: the original kernel
        ("37", "90", "80", "linear_gelu_kernel_k3"),  # ragged K: the third block masked past 90
        ("70", "80", "130", "linear_gelu_kernel_k5"),  # K in five blocks of 16
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
    assert "linear_gelu_kernel_tiled" in first and first.count("tl.exp(acc * (") == 7  # every kernel


def _two_kernel_seed() -> str:
    """The linear+GELU seed computing its batch's two halves with two copies of the kernel."""
    seed = _seed("linear_bias_gelu_bf16")
    start, end = seed.index("@triton.jit"), seed.index("class ModelNew")
    kernel = seed[start:end]
    seed = seed[:end] + kernel.replace("linear_gelu_kernel", "linear_gelu_kernel_b") + seed[end:]
    launch = seed[seed.index("        BM, BN, BK = 64, 64, 32") : seed.index("        return y")]
    second = (
        launch.replace("BM", "BM2")
        .replace("BN", "BN2")
        .replace("BK", "BK2")
        .replace("grid", "grid_b")
        .replace("linear_gelu_kernel[", "linear_gelu_kernel_b[")
        .replace("(x, w, b, y, M,", "(xb, w, b, yb, M - h,")
        .replace("x.stride", "xb.stride")
        .replace("y.stride", "yb.stride")
        .replace("cdiv(M,", "cdiv(M - h,")
    )
    first = launch.replace("(x, w, b, y, M,", "(x, w, b, y, h,").replace("cdiv(M,", "cdiv(h,")
    halves = "        h = M // 2\n        xb, yb = x[h:], y[h:]\n"
    return seed.replace(launch, halves + first + second)


def test_each_kernel_of_a_module_takes_the_move(tmp_path: Path) -> None:
    seed = _two_kernel_seed()
    assert [m.kernel for m in stationary_mutations(seed)][::2] == [
        "linear_gelu_kernel",
        "linear_gelu_kernel_b",
    ]
    once = stationary_mutations(seed)[0].apply(seed)
    left = stationary_mutations(once)
    assert {m.kernel for m in left} == {"linear_gelu_kernel_b"}  # not the first's own kernels
    both = left[0].apply(once)
    assert stationary_mutations(both) == [] and both.count("def _kegen_stationary_plan(") == 1
    text = (PRODUCTION / "linear_bias_gelu_bf16" / "problem.py").read_text()
    problem = tmp_path / "problem.py"
    problem.write_text(
        text.replace("_size(4096)", "70").replace("_size(512)", "48").replace("_size(2048)", "80")
    )
    res = evaluate(problem, both, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
    assert [launch["kernel"] for launch in res.profile["launches"]] == [  # type: ignore[index]
        "linear_gelu_kernel_k3",
        "linear_gelu_kernel_b_k3",
    ]


def test_an_augmented_epilogue_stays_with_its_tile(tmp_path: Path) -> None:
    """`acc += bias` reads the tile's accumulator: it stays in the M loop (it was hoisted out once)."""
    seed = _seed("linear_bias_gelu_bf16").replace("acc = acc + bias[None, :]", "acc += bias[None, :]")
    assert "acc += bias[None, :]" in seed
    out = stationary_mutations(seed)[0].apply(seed)
    head = out[out.index("def linear_gelu_kernel(") : out.index("for kegen_m_tile in range(")]
    assert "acc += bias" not in head
    text = (PRODUCTION / "linear_bias_gelu_bf16" / "problem.py").read_text()
    problem = tmp_path / "problem.py"
    problem.write_text(text.replace("_size(4096)", "70").replace("_size(512)", "64").replace("_size(2048)", "80"))
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
