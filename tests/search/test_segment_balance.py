"""The row-balanced segments move (mutations/memory/segments.py).

AST-level: the partition it writes, the launch it rewrites, the kernels it leaves alone. The
partition itself is checked in Python against brute force (every segment in exactly one run, for
long-tail, empty-heavy and one-giant-segment offsets). Simulated: the rewritten jagged softmax,
jagged sum and embedding bag seeds are exact against PyTorch with a program count that does not
divide the segments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.segments import rewrite, segment_balance_mutations
from kegen.suites import find_suite

SUITE = find_suite("production")


def _seed(name: str) -> str:
    return SUITE.select([name]).problems[0].seed_path.read_text()


def test_the_jagged_seeds_and_the_bag_seed_are_recognised() -> None:
    for name, kernel in [("jagged_softmax_fp32", "jagged_softmax_kernel"), ("jagged_sum_fp32", "jagged_sum_kernel"),
                         ("embedding_bag_sum_fp16", "embedding_bag_kernel")]:
        assert [m.name for m in segment_balance_mutations(_seed(name))] == [f"segment_balance@{kernel}"]
    assert segment_balance_mutations(_seed("jagged_to_padded_fp16")) == []  # no per-segment program


def test_the_rewrite_walks_a_run_of_segments_and_launches_one_program_per_pe() -> None:
    out = rewrite(_seed("jagged_softmax_fp32"), "jagged_softmax_kernel")
    assert "SEG_PROGRAMS = 64  # one program per PE" in out
    assert "for seg in range(kegen_s0, kegen_s1):" in out
    assert "seg = tl.program_id(0)" not in out
    assert "kegen_s1 = tl.where(kegen_pid == kegen_nprog - 1, kegen_nseg, kegen_s1)" in out
    assert "jagged_softmax_kernel[min(SEG_PROGRAMS, num_segments),](" in out
    assert "kegen_nseg=num_segments" in out
    assert segment_balance_mutations(out) == []  # it reads the program count now
    dual = _seed("jagged_softmax_fp32").replace("BLOCK_D=triton.next_power_of_2(dim)",
                                                "BLOCK_D=triton.next_power_of_2(dim), dual_core=True")
    assert "[min(2 * SEG_PROGRAMS, num_segments),]" in rewrite(dual, "jagged_softmax_kernel")


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("    seg = tl.program_id(0)\n", "    seg = tl.program_id(0)\n    if seg > 10000:\n        return\n"),
        ("jagged_softmax_kernel[(num_segments,)]", "jagged_softmax_kernel[(num_segments, 1)]"),
        ("    seg = tl.program_id(0)\n", "    seg = tl.program_id(0)\n    other = tl.num_programs(0)\n"),
    ],
    ids=["early-return", "2-d-grid", "reads-program-count"],
)
def test_other_kernels_are_left_alone(edit: str, why: str) -> None:
    src = _seed("jagged_softmax_fp32")
    assert edit in src, edit
    bad = src.replace(edit, why)
    assert segment_balance_mutations(bad) == []
    with pytest.raises(MutationError):
        rewrite(bad, "jagged_softmax_kernel")


def _runs(offsets: list[int], nprog: int, fine: int) -> list[tuple[int, int]]:
    """The partition the kernel computes, in Python (the same two-level search)."""
    nseg = len(offsets) - 1
    coarse = 1 << max(0, (-(-nseg // fine) - 1).bit_length())
    base, total = offsets[0], offsets[nseg]
    out = []
    for pid in range(nprog):
        lo = base + pid * (total - base) // nprog
        hi = base + (pid + 1) * (total - base) // nprog

        def count(share: int) -> int:
            firsts = [offsets[s] if s < nseg else total for s in range(0, coarse * fine, fine)]
            at = max(sum(f < share for f in firsts) - 1, 0) * fine
            near = [offsets[at + i] if at + i < nseg else total for i in range(fine)]
            return at + sum(x < share for x in near)

        out.append((count(lo), nseg if pid == nprog - 1 else count(hi)))
    return out


@pytest.mark.parametrize("lengths", [
    [3, 0, 0, 7, 1, 0, 250, 2, 0, 0, 5] * 37,
    [0] * 50 + [1000] + [0] * 70,
    [1] * 1000,
    [0, 0, 0],
])
@pytest.mark.parametrize("nprog", [1, 7, 64])
def test_the_runs_tile_the_segments(lengths: list[int], nprog: int) -> None:
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    root = int(len(lengths) ** 0.5)  # the launch's SEG_FINE_BLOCK: max(32, next_power_of_2(root))
    fine = max(32, 1 << max(0, (root - 1).bit_length()))
    runs = _runs(offsets, nprog, fine)
    covered = [s for a, b in runs for s in range(a, b)]
    assert covered == list(range(len(lengths)))  # each segment once, in order


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "kernel", "sizes"),
    [
        ("jagged_softmax_fp32", "jagged_softmax_kernel", "NUM_SEGMENTS = 100\nMAX_LEN = 40\n"),
        ("jagged_sum_fp32", "jagged_sum_kernel", "NUM_SEGMENTS = 90\nMAX_LEN = 30\n"),
        ("embedding_bag_sum_fp16", "embedding_bag_kernel", "NUM_BAGS = 70\nMAX_BAG = 20\nNUM_EMBEDDINGS = 512\n"),
    ],
)
def test_the_balanced_kernels_are_exact_on_the_simulator(problem: str, kernel: str, sizes: str,
                                                          tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    p = SUITE.select([problem]).problems[0]
    path = tmp_path / "problem.py"
    path.write_text(p.problem_path.read_text() + "\n\n" + sizes)
    out = rewrite(p.seed_path.read_text(), kernel).replace("SEG_PROGRAMS = 64", "SEG_PROGRAMS = 7")
    r = evaluate(path, out, config=EvalConfig(target="mtia", trials=2, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"
