"""The loop vectorizer: R rows per step as one masked 2-D block (kegen.search.operators.mutations.vectorize).

AST-level: what qualifies, what the rewrite emits (masks combined, reductions masked, the row
block a launch keyword the block moves tune), and every case it must leave alone. Simulated: the
rewritten production seeds and a scalar-accumulator kernel are correct against PyTorch on bags of
length 0, 1, R - 1, R, R + 1 and several R.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from kegen.profiling import Diagnosis
from kegen.search.config import OperatorConfig
from kegen.search.operators.context import OperatorContext, ProblemInfo
from kegen.search.operators.mutations import MutationError, vectorize_mutations
from kegen.search.operators.mutations.blocks import block_mutations, find_blocks
from kegen.search.operators.mutations.vectorize import vectorize
from kegen.search.operators.offline import OfflineOperator
from kegen.search.store import Node, code_hash
from kegen.suites import find_suite

PRODUCTION = {p.name: p for p in find_suite("production").problems}
LOOP_SEEDS = ("embedding_bag_mean_fp32", "embedding_bag_sum_fp16", "jagged_sum_fp32", "jagged_softmax_fp32")

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n\n"


def _module(kernel_body: str, params: str = "x_ptr, y_ptr, off_ptr, dim, BLOCK: tl.constexpr") -> str:
    """A module with one jit kernel `k` (its body given) and a launcher passing BLOCK=64."""
    body = textwrap.indent(textwrap.dedent(kernel_body).strip("\n"), "    ")
    return (
        f"{HEADER}@triton.jit\ndef k({params}):\n    pid = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n"
        f"    start = tl.load(off_ptr + pid)\n    end = tl.load(off_ptr + pid + 1)\n{body}\n\n\n"
        "def run(x, y, off):\n    k[(off.numel() - 1,)](x, y, off, x.shape[1], BLOCK=64)\n"
    )


GATHER = _module(
    """
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(start, end):
        acc += tl.load(x_ptr + i * dim + cols, mask=cols < dim, other=0.0)
    tl.store(y_ptr + pid * dim + cols, acc, mask=cols < dim)
    """
)


def _loop_heads(src: str) -> list[str]:
    return [ast.unparse(n.iter) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.For)]


def test_every_loop_of_the_production_loop_seeds_is_vectorized() -> None:
    for name in LOOP_SEEDS:
        seed = PRODUCTION[name].seed_path.read_text()
        out = vectorize(seed, 8)
        heads = _loop_heads(out)
        assert heads and all(h.endswith(", R)") for h in heads), (name, heads)
        assert len(heads) == (3 if "softmax" in name else 1)
        fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
        assert ast.unparse(fn.args.args[-1]) == "R: tl.constexpr"
        assert "R=8)" in out and "tl.arange(0, R)[:, None]" in out


def test_masks_are_combined_and_loads_get_other() -> None:
    src = _module(
        """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        for i in range(start, end):
            row = tl.load(off_ptr + i)
            x = tl.load(x_ptr + row * dim + cols, cols < dim, float("-inf"))
            acc += tl.load(x_ptr + row * dim + cols)
            m = tl.maximum(x, m)
            tl.store(y_ptr + i * dim + cols, x)
        tl.store(y_ptr + pid * dim + cols, acc + m, mask=cols < dim)
        """
    )
    out = vectorize(src, 16)
    assert "row = tl.load(off_ptr + i, mask=i_mask, other=0)" in out  # no mask before: row mask, other=0
    assert "mask=(cols < dim) & i_mask, other=float('-inf'))" in out  # positional mask/other kept
    assert "tl.load(x_ptr + row * dim + cols, mask=i_mask, other=0), 0), axis=0)" in out
    assert "m = tl.maximum(m, tl.max(tl.where(i_mask, x, m), axis=0))" in out  # symmetric form, acc neutral
    assert "tl.store(y_ptr + i * dim + cols, x, mask=i_mask)" in out
    assert "R=16" in out


def test_a_scalar_accumulator_reduces_to_a_scalar_and_row_reductions_keep_their_rows() -> None:
    src = _module(
        """
        w = tl.load(x_ptr + cols, mask=cols < dim, other=0.0)
        total = 0.0
        for i in range(start, end):
            total = total + tl.sum(tl.load(x_ptr + i * dim + cols, mask=cols < dim, other=0.0) * w, axis=0)
        tl.store(y_ptr + pid, total)
        """
    )
    out = vectorize(src, 8)
    assert (
        "tl.sum(tl.load(x_ptr + i * dim + cols, mask=(cols < dim) & i_mask, other=0.0) * w, axis=1, keep_dims=True)"
        in out
    )
    assert "total += tl.sum(tl.sum(tl.where(i_mask," in out and "axis=1), axis=0)" in out


def test_a_loaded_bound_is_hoisted_and_range_of_one_argument_starts_at_zero() -> None:
    src = _module(
        """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(tl.load(off_ptr + pid + 2)):
            acc += tl.load(x_ptr + i * dim + cols)
        tl.store(y_ptr + pid * dim + cols, acc)
        """
    )
    out = vectorize(src, 8)
    assert "i_end = tl.load(off_ptr + pid + 2)" in out and "for i_blk in range(0, i_end, R):" in out
    assert "i_mask = i < i_end" in out


REFUSED = {
    "store aliases a load": """
        for i in range(start, end):
            x = tl.load(x_ptr + i * dim + cols)
            tl.store(x_ptr + i * dim + cols, x * 2.0)
        """,
    "data-dependent control flow": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            if tl.load(off_ptr + i) > 0:
                acc += tl.load(x_ptr + i * dim + cols)
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "atomics": """
        for i in range(start, end):
            tl.atomic_add(y_ptr + cols, tl.load(x_ptr + i * dim + cols))
        """,
    "break": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            acc += tl.load(x_ptr + i * dim + cols)
            break
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "scatter through a loaded index": """
        for i in range(start, end):
            row = tl.load(off_ptr + i)
            tl.store(y_ptr + row * dim + cols, tl.load(x_ptr + i * dim + cols))
        """,
    "local read after the loop": """
        for i in range(start, end):
            x = tl.load(x_ptr + i * dim + cols)
            tl.store(y_ptr + i * dim + cols, x)
        tl.store(y_ptr + pid * dim + cols, x)
        """,
    "accumulator read in the body": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            acc = acc * 0.5 + tl.load(x_ptr + i * dim + cols)
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "running value stored": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            acc += tl.load(x_ptr + i * dim + cols)
            tl.store(y_ptr + i * dim + cols, acc)
        """,
    "carried non-reduction": """
        prev = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            x = tl.load(x_ptr + i * dim + cols)
            tl.store(y_ptr + i * dim + cols, x - prev)
            prev = x
        """,
    "2-D tile in the body": """
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for i in range(start, end):
            acc += tl.load(x_ptr + i * dim + cols[:, None] + cols[None, :])
        tl.store(y_ptr + cols[:, None] * BLOCK + cols[None, :], acc)
        """,
    "step other than 1": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end, 2):
            acc += tl.load(x_ptr + i * dim + cols)
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "unknown call": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            acc += helper(tl.load(x_ptr + i * dim + cols))
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "mask depends on the row, address does not": """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            acc += tl.load(x_ptr + cols, mask=cols < i, other=0.0)
        tl.store(y_ptr + pid * dim + cols, acc)
        """,
    "2-D value stored": """
        t = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for i in range(start, end):
            tl.store(y_ptr + i * dim + cols, t)
        """,
    "two stores to one buffer": """
        for i in range(start, end):
            x = tl.load(x_ptr + i * dim + cols)
            tl.store(y_ptr + i * dim + cols, x)
            tl.store(y_ptr + (i + 1) * dim + cols, x + 1.0)
        """,
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_loops_the_rewrite_cannot_prove_safe_are_refused(case: str) -> None:
    src = _module(REFUSED[case])
    with pytest.raises(MutationError):
        vectorize(src, 8)
    assert vectorize_mutations(src) == []


def test_only_the_qualifying_loop_of_a_kernel_is_rewritten() -> None:
    src = _module(
        """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(start, end):
            if i > start:
                acc += tl.load(x_ptr + i * dim + cols)
        for j in range(start, end):
            acc += tl.load(x_ptr + j * dim + cols)
        tl.store(y_ptr + pid * dim + cols, acc)
        """
    )
    heads = _loop_heads(vectorize(src, 8))
    assert heads == ["range(start, end)", "range(start, end, R)"]


def test_a_loop_holding_a_loop_is_left_alone_and_its_inner_loop_vectorized() -> None:
    src = _module(
        """
        for d0 in range(0, dim, BLOCK):
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(start, end):
                acc += tl.load(x_ptr + i * dim + d0 + cols, mask=d0 + cols < dim, other=0.0)
            tl.store(y_ptr + pid * dim + d0 + cols, acc, mask=d0 + cols < dim)
        """
    )
    assert _loop_heads(vectorize(src, 8)) == ["range(0, dim, BLOCK)", "range(start, end, R)"]


def test_a_launch_passing_one_buffer_as_input_and_output_is_refused() -> None:
    src = _module(
        """
        for i in range(start, end):
            x = tl.load(x_ptr + (i + 1) * dim + cols)
            tl.store(y_ptr + i * dim + cols, x)
        """
    )
    vectorize(src, 8)  # distinct buffers: fine
    with pytest.raises(MutationError, match="passes x to a stored and a loaded"):
        vectorize(src.replace("k[(off.numel() - 1,)](x, y,", "k[(off.numel() - 1,)](x, x,"), 8)


def test_a_kernel_called_without_a_grid_or_with_kwargs_is_refused() -> None:
    with pytest.raises(MutationError, match="without a grid"):
        vectorize(GATHER + "\n\ndef g(x):\n    k(x, x, x, 1, BLOCK=64)\n", 8)
    with pytest.raises(MutationError, match="kwargs"):
        vectorize(GATHER.replace("BLOCK=64)", "**opts)"), 8)


def test_the_block_moves_tune_the_row_block_and_the_move_is_offered_for_latency() -> None:
    out = vectorize(GATHER, 8)
    sites = {s.param: s for s in find_blocks(out)}
    assert sites["R"].value == 8 and sites["R"].axis is None
    assert {m.name for m in block_mutations(out)} >= {"R=16@k", "R=32@k", "R=4@k"}
    muts = {m.name: m for m in vectorize_mutations(GATHER)}
    assert set(muts) == {"vectorize_rows=8@k", "vectorize_rows=32@k"}
    assert "R=32" in muts["vectorize_rows=32@k"].apply(GATHER)
    assert vectorize_mutations(out) == []  # nothing left to vectorize
    latency = Diagnosis(bound="latency", remedies=(("overlap", 1.0), ("bigger_commands", 0.5)))
    assert OfflineOperator.diagnosis_term(muts["vectorize_rows=8@k"], latency) == pytest.approx(1.5)


LATENCY = Diagnosis(
    bound="latency",
    remedies=(("overlap", 1.25), ("bigger_commands", 0.65)),
    stalls=(("CORE:scalar_mem", 0.3), ("SIMD:dependency", 0.2), ("CORE:fence_wait_DMA", 0.17)),
)


def test_the_offline_operator_offers_the_segment_gather_then_row_blocks_on_a_latency_bound_gather_seed() -> None:
    seed = PRODUCTION["embedding_bag_mean_fp32"].seed_path.read_text()
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=seed, code_hash=code_hash(seed), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target="mtia", island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    info = ProblemInfo(
        path=PRODUCTION["embedding_bag_mean_fp32"].problem_path, source="", op_class="embedding"
    )
    ctx = OperatorContext(info, node, seed, None, "optimize", LATENCY, None, [], [])
    op = OfflineOperator(OperatorConfig(), seed=0)
    cands = op.candidates(ctx)
    vec = [m for m in cands if m.family == "vectorize"]
    assert {m.name for m in vec} == {
        "vectorize_rows=8@embedding_bag_kernel",
        "vectorize_rows=32@embedding_bag_kernel",
    }
    ranked = sorted(cands, key=lambda m: -(m.prior + op.diagnosis_term(m, LATENCY)))
    # the segment gather (mutations/memory/embedding.py) rewrites the whole bag loop and goes first
    # (6.9x on embedding_bag_sum_fp16 against vectorize's 3.6x); the row-block moves follow it
    families = [m.family for m in ranked[:3]]
    assert families == ["embedding_bag", "vectorize", "vectorize"], [m.name for m in ranked[:3]]


def test_a_taken_name_gets_another_row_block_name() -> None:
    src = GATHER.replace("BLOCK", "R")
    out = vectorize(src, 8)
    assert "ROWS_R: tl.constexpr" in out and "ROWS_R=8" in out


# ---------------------------------------------------------------- simulated, against PyTorch

LENGTHS = (0, 1, 7, 8, 9, 0, 33, 2, 31, 32, 0, 70)  # around R = 8 and R = 32, empty bags included
INPUTS = {
    "embedding_bag": (
        "def get_inputs():\n"
        f"    lengths = torch.tensor({list(LENGTHS)})\n"
        "    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])\n"
        "    indices = _zipf_rows(int(offsets[-1]), NUM_EMBEDDINGS)\n"
        "    return [torch.randn(NUM_EMBEDDINGS, EMBEDDING_DIM, dtype=DTYPE), indices, offsets]\n"
    ),
    "jagged": (
        "def get_inputs():\n"
        f"    lengths = torch.tensor({list(LENGTHS)})\n"
        "    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])\n"
        "    return [torch.randn(int(offsets[-1]), DIM, dtype=torch.float32), offsets]\n"
    ),
}


def _with_lengths(name: str, tmp_path: Path) -> Path:
    """The production problem with bags (segments) of the lengths in LENGTHS."""
    text = PRODUCTION[name].problem_path.read_text()
    kind = "embedding_bag" if name.startswith("embedding_bag") else "jagged"
    dtype = "torch.float16" if "fp16" in name else "torch.float32"
    path = tmp_path / f"{name}.py"
    path.write_text(f"{text}\n\nDTYPE = {dtype}\n\n\n{INPUTS[kind]}")
    return path


def _evaluate(problem: Path, source: str) -> None:
    from kegen.eval import EvalConfig, evaluate

    r = evaluate(
        problem, source, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True)
    )
    assert r.status.value == "ok", f"{problem.name}: {r.status} {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize("name", LOOP_SEEDS)
def test_rewritten_production_seeds_are_correct_on_the_simulator(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mtia_sim.simulator")
    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.02")
    problem = _with_lengths(name, tmp_path)
    seed = PRODUCTION[name].seed_path.read_text()
    _evaluate(problem, vectorize(seed, 32 if "softmax" in name else 8))


@pytest.mark.slow
def test_a_broadcast_count_loop_of_another_suite_stays_correct_on_the_simulator() -> None:
    pytest.importorskip("mtia_sim.simulator")
    (p,) = find_suite("default").select(["bucketize"]).problems
    out = vectorize(p.seed_path.read_text(), 8)
    assert "count += tl.sum(tl.where(i_mask, (b < x).to(tl.int32), 0), axis=0)" in out
    _evaluate(p.problem_path, out)


SCALAR_PROBLEM = '''
import torch
import torch.nn as nn

LENGTHS = [0, 1, 3, 4, 5, 0, 11, 2]


class Model(nn.Module):
    """Per segment: the sum and the max over its rows of the row's dot product with w."""

    def forward(self, values, w, offsets):
        dots = values @ w
        out = torch.zeros(2 * (offsets.numel() - 1))
        for s in range(offsets.numel() - 1):
            seg = dots[offsets[s]:offsets[s + 1]]
            out[2 * s] = seg.sum()
            out[2 * s + 1] = seg.max() if seg.numel() else float("-inf")
        return out


def get_inputs():
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.tensor(LENGTHS), 0)])
    return [torch.randn(int(offsets[-1]), 48), torch.randn(48), offsets]


def get_init_inputs():
    return []
'''

SCALAR_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def dots_kernel(v_ptr, w_ptr, off_ptr, y_ptr, dim, BLOCK: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(off_ptr + seg)
    end = tl.load(off_ptr + seg + 1)
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < dim, other=0.0)
    total = tl.sum(tl.zeros((BLOCK,), dtype=tl.float32), axis=0)
    best = tl.max(tl.full((BLOCK,), float("-inf"), dtype=tl.float32), axis=0)
    for r in range(start, end):
        d = tl.sum(tl.load(v_ptr + r * dim + cols, mask=cols < dim, other=0.0) * w, axis=0)
        total += d
        best = tl.maximum(d, best)
    tl.store(y_ptr + 2 * seg, total)
    tl.store(y_ptr + 2 * seg + 1, best)


class ModelNew(nn.Module):
    def forward(self, values, w, offsets):
        n = offsets.numel() - 1
        y = torch.empty(2 * n, dtype=torch.float32)
        dots_kernel[(n,)](values, w, offsets, y, values.shape[1], BLOCK=64)
        return y
"""


@pytest.mark.slow
def test_a_scalar_accumulator_kernel_stays_correct_on_the_simulator(tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    problem = tmp_path / "segment_dots.py"
    problem.write_text(SCALAR_PROBLEM)
    out = vectorize(SCALAR_CANDIDATE, 4)
    assert "keep_dims=True" in out and "axis=1), axis=0)" in out
    _evaluate(problem, out)
