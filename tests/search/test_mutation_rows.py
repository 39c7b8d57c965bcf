"""One block per row (`mutations.rows`) and load reuse (`mutations.loads`): what is rewritten, what is
left alone, what declines, and that the rewritten kernels stay correct on the simulated MTIA."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.profiling import Diagnosis
from kegen.search.config import OperatorConfig
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.rows import ROW_FAMILY, find_row_loops, one_block_per_row, row_mutations
from kegen.search.operators.offline import OfflineOperator
from tests.search.search_helpers import ROOT

PRODUCTION = ROOT / "kegen" / "suites" / "production"
DEFAULT = ROOT / "kegen" / "suites" / "default"
SIM = EvalConfig(target="mtia", trials=1)

LAUNCH = """
class ModelNew(nn.Module):
    def forward(self, x, w):
        rows, cols = x.shape
        y = torch.empty_like(x)
        {launch}
        return y
"""


def module(
    kernel: str, launch: str = "k[(rows,)](x, w, y, cols, x.stride(0), BLOCK=64)", imports: str = ""
) -> str:
    """A candidate module: imports, the jit kernel `kernel` (dedented) and a launcher."""
    head = imports or "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
    return head + "\n\n@triton.jit\n" + textwrap.dedent(kernel) + LAUNCH.format(launch=launch)


TWO_PASS = """
def k(x_ptr, w_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        mask = start + offs < n
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    r = tl.sum(acc, axis=0) / n
    for start in range(0, n, BLOCK):
        mask = start + offs < n
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + start + offs, x * r * w, mask=mask)
"""


def kernel_of(source: str, name: str = "k") -> ast.FunctionDef:
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return fn


def loads(source: str, name: str = "k") -> list[str]:
    """The text of every tl.load call in kernel `name`."""
    fn = kernel_of(source, name)
    return [
        ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
    ]


def loops(source: str, name: str = "k") -> list[str]:
    return [ast.unparse(n.iter) for n in ast.walk(kernel_of(source, name)) if isinstance(n, ast.For)]


def rewrite(source: str, bound: str = "n", block: str = "BLOCK", kernel: str = "k") -> str:
    return one_block_per_row(source, kernel, bound, block)[0]


def test_two_passes_become_one_block_and_x_is_loaded_once() -> None:
    src = module(TWO_PASS)
    (m,) = row_mutations(src)
    assert (
        m.family == ROW_FAMILY and m.kernel == "k" and m.remedies == ("fewer_bytes",) and "memory" in m.helps
    )
    out = m.apply(src)
    assert loops(out) == []
    x_loads = [t for t in loads(out) if "x_ptr" in t]
    assert len(x_loads) == 1 and len(loads(out)) == 2
    assert "BLOCK=triton.next_power_of_2(cols)" in out
    body = [ast.unparse(s) for s in kernel_of(out).body]
    assert body.count("start = 0") == 1 and sum(s.startswith("mask =") for s in body) == 1
    assert "1 repeated load reused" in m.description and "2 loops over n" in m.description
    assert row_mutations(out) == []  # nothing left to rewrite


def test_a_single_pass_is_offered_for_bigger_commands_not_fewer_bytes() -> None:
    one_pass = (
        TWO_PASS[: TWO_PASS.index("    r = tl.sum")] + "    tl.store(y_ptr + row, tl.sum(acc, axis=0))\n"
    )
    (m,) = row_mutations(module(one_pass))
    (multi,) = row_mutations(module(TWO_PASS))
    assert m.remedies == ("bigger_commands",) and multi.remedies == ("fewer_bytes",)
    assert m.prior < multi.prior and "0 repeated loads" in m.description


def test_a_store_in_between_keeps_the_second_load() -> None:
    kernel = TWO_PASS.replace(
        "    r = tl.sum(acc", "    tl.store(y_ptr + row, tl.sum(acc, axis=0))\n    r = tl.sum(acc"
    )
    out = rewrite(module(kernel))
    assert loops(out) == [] and len([t for t in loads(out) if "x_ptr" in t]) == 2
    atomic = TWO_PASS.replace("    r = tl.sum(acc", "    tl.atomic_add(y_ptr, 1.0)\n    r = tl.sum(acc")
    assert len([t for t in loads(rewrite(module(atomic))) if "x_ptr" in t]) == 2
    helper = TWO_PASS.replace("    r = tl.sum(acc", "    side_effect(y_ptr)\n    r = tl.sum(acc")
    assert len([t for t in loads(rewrite(module(helper))) if "x_ptr" in t]) == 2  # a call may write


def test_a_reassigned_name_or_another_mask_or_other_value_keeps_the_second_load() -> None:
    moved = TWO_PASS.replace("    r = tl.sum(acc", "    row = row + 1\n    r = tl.sum(acc")
    assert len([t for t in loads(rewrite(module(moved))) if "x_ptr" in t]) == 2
    other = TWO_PASS.replace(
        "mask=mask, other=0.0).to(tl.float32)\n        w", "mask=mask, other=1.0).to(tl.float32)\n        w"
    )
    assert len([t for t in loads(rewrite(module(other))) if "x_ptr" in t]) == 2
    mask2 = TWO_PASS.replace(
        "mask=mask, other=0.0).to(tl.float32)\n        w",
        "mask=offs < n, other=0.0).to(tl.float32)\n        w",
    )
    assert len([t for t in loads(rewrite(module(mask2))) if "x_ptr" in t]) == 2


def test_an_equal_mask_under_another_name_and_a_load_under_a_cast_are_reused() -> None:
    kernel = """
    def k(x_ptr, w_ptr, y_ptr, N, stride, BLK: tl.constexpr):
        pid = tl.program_id(0)
        cols = tl.arange(0, BLK)
        total = tl.zeros((BLK,), dtype=tl.float32)
        for c0 in range(0, N, BLK):
            total += tl.load(x_ptr + pid * stride + c0 + cols, mask=c0 + cols < N, other=0.0).to(tl.float32)
        mean = tl.sum(total, axis=0) / N
        for c0 in range(0, N, BLK):
            inside = c0 + cols < N
            raw = tl.load(x_ptr + pid * stride + c0 + cols, inside, 0.0)
            tl.store(y_ptr + pid * stride + c0 + cols, raw - mean.to(raw.dtype), mask=inside)
    """
    src = module(kernel, "k[(rows,)](x, w, y, N=cols, stride=x.stride(0), BLK=64)")
    out = rewrite(src, "N", "BLK")
    (x_load,) = loads(out)  # the second load (positional mask/other) is the first one's value
    fn = kernel_of(out)
    hoisted = [
        ast.unparse(s) for s in fn.body if isinstance(s, ast.Assign) and ast.unparse(s.value) == x_load
    ]
    assert len(hoisted) == 1 and hoisted[0].startswith("row_tile0 = ")
    assert "total += row_tile0.to(tl.float32)" in ast.unparse(fn) and "raw = row_tile0" in ast.unparse(fn)
    assert "BLK=triton.next_power_of_2(cols)" in out


def test_loops_with_other_bounds_nested_loops_and_loops_under_if_are_left_alone() -> None:
    kernel = """
    def k(x_ptr, w_ptr, y_ptr, n, m, stride, BLOCK: tl.constexpr, BM: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n, BLOCK):
            acc += tl.load(x_ptr + row * stride + start + offs, mask=start + offs < n, other=0.0)
        for j in range(0, m, BM):
            acc += tl.load(w_ptr + j + tl.arange(0, BM), mask=j + tl.arange(0, BM) < m, other=0.0).sum()
        for i in range(0, n, BLOCK):
            for q in range(0, 2):
                acc += q
        if row > 0:
            for t in range(0, n, BLOCK):
                acc += 1.0
        for u in range(1, n, BLOCK):
            acc += 2.0
        tl.store(y_ptr + row * stride + offs, acc, mask=offs < n)
    """
    src = module(kernel, "k[(rows,)](x, w, y, cols, 3, x.stride(0), BLOCK=64, BM=16)")
    found = [(r.kernel, r.bound, r.block, r.count) for r in find_row_loops(src)]
    assert found == [("k", "n", "BLOCK", 1), ("k", "m", "BM", 1)]  # one move per (bound, block)
    out = rewrite(src)
    kept = ["range(0, n, BLOCK)", "range(0, 2)", "range(0, n, BLOCK)", "range(1, n, BLOCK)"]
    assert sorted(loops(out)) == sorted(["range(0, m, BM)", *kept])
    assert "BM=16" in out and "BLOCK=triton.next_power_of_2(cols)" in out
    other = rewrite(src, "m", "BM")
    assert (
        sorted(loops(other)) == sorted(["range(0, n, BLOCK)", *kept])
        and "BM=triton.next_power_of_2(3)" in other
    )


NOT_ROWS = {
    "literal step": TWO_PASS.replace("range(0, n, BLOCK)", "range(0, n, 64)"),
    "step not constexpr": TWO_PASS.replace("BLOCK: tl.constexpr", "BLOCK"),
    "bound not a parameter": TWO_PASS.replace("range(0, n, BLOCK)", "range(0, n * 2, BLOCK)"),
    "start not 0": TWO_PASS.replace("range(0, n, BLOCK)", "range(BLOCK, n, BLOCK)"),
    "unmasked access": TWO_PASS.replace(
        "w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)", "w = tl.load(w_ptr + start + offs)"
    ),
    "unmasked store": TWO_PASS.replace("x * r * w, mask=mask)", "x * r * w)"),
    "loop variable read after": TWO_PASS + "    tl.store(y_ptr + start, 0.0, mask=row < 0)\n",
    "block tiles a program axis": TWO_PASS.replace(
        "row = tl.program_id(0)", "row = tl.program_id(0) * BLOCK"
    ),
    "bound reassigned": TWO_PASS.replace(
        "    row = tl.program_id(0)", "    row = tl.program_id(0)\n    n = n - 1"
    ),
    "loop variable read after another loop": TWO_PASS.replace(
        "    r = tl.sum(acc", "    for j in range(0, 2):\n        acc += 1.0\n    r = tl.sum(acc + start"
    )
    + "",
    "autotuned": TWO_PASS.replace("def k(", "@triton.autotune(configs=[], key=['n'])\ndef k("),
}


@pytest.mark.parametrize("why", sorted(NOT_ROWS))
def test_a_kernel_that_does_not_qualify_is_declined(why: str) -> None:
    src = module(NOT_ROWS[why])
    assert row_mutations(src) == [], why
    with pytest.raises(MutationError):
        rewrite(src)


def test_the_loop_variable_may_be_bound_again_after_its_loops() -> None:
    again = TWO_PASS + "    start = 3\n    tl.store(y_ptr + row, start * 1.0)\n"
    assert loops(rewrite(module(again))) == []
    reused = TWO_PASS.replace(
        "    r = tl.sum(acc", "    for start in range(0, 4):\n        acc += start\n    r = tl.sum(acc"
    )
    out = rewrite(module(reused))
    assert loops(out) == ["range(0, 4)"]  # another loop over `start` (other bound) is kept


def test_a_loop_with_a_jump_is_kept_and_the_others_become_one_block() -> None:
    jump = TWO_PASS.replace(
        "        acc += x * x", "        acc += x * x\n        if x.sum() > 0:\n            continue", 1
    )
    (m,) = row_mutations(module(jump))
    assert "1 loop over n" in m.description
    assert loops(m.apply(module(jump))) == ["range(0, n, BLOCK)"]


def test_loads_with_unnamed_arguments_are_not_merged_and_deep_expressions_decline() -> None:
    starred = TWO_PASS.replace("mask=mask, other=0.0).to", "mask=mask, other=0.0, **opts).to")
    out = rewrite(module(starred.replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, opts=None):")))
    assert len([t for t in loads(out) if "x_ptr" in t]) == 2
    deep = TWO_PASS.replace("acc += x * x", "acc += x" + " + x" * 1500)
    assert row_mutations(module(deep)) == []


def test_launches_map_n_and_block_wherever_they_are_passed() -> None:
    positional = rewrite(module(TWO_PASS, "k[(rows,)](x, w, y, x.shape[1], x.stride(0), 64)"))
    assert "k[rows,](x, w, y, x.shape[1], x.stride(0), triton.next_power_of_2(x.shape[1]))" in positional
    default = TWO_PASS.replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr = 128")
    added = rewrite(module(default, "k[(rows,)](x, w, y, n=cols, stride=x.stride(0))"))
    assert "BLOCK=triton.next_power_of_2(cols)" in added
    bare = (
        "import torch\nimport torch.nn as nn\nfrom triton import jit as _jit\nimport triton.language as tl\n"
    )
    imported = rewrite(module(TWO_PASS, imports=bare))
    assert "\nimport triton\n" in imported and "triton.next_power_of_2(cols)" in imported
    for launch in ("k[(rows,)](*args, BLOCK=64)", "k[(rows,)](x, w, y, **kw)", "pass"):
        with pytest.raises(MutationError):
            rewrite(module(TWO_PASS, launch))


def test_the_offline_operator_offers_it_first_on_a_memory_bound_row_kernel() -> None:
    from tests.search.test_offline_diagnosis import _ctx

    folder = PRODUCTION / "layer_norm_bf16"
    diag = Diagnosis(bound="memory")
    op = OfflineOperator(OperatorConfig(), seed=0)
    ctx = _ctx(folder, diag)
    muts = op.candidates(ctx)
    rows = [m for m in muts if m.family == ROW_FAMILY]
    assert [m.name for m in rows] == ["row_block=n_cols@layer_norm_kernel"]
    best = max(muts, key=lambda m: m.prior + op.diagnosis_term(m, diag))
    assert best.family == ROW_FAMILY
    proposal = op.propose(ctx)
    assert proposal.meta["family"] == ROW_FAMILY and proposal.code is not None


# --- on the simulator: the rewritten kernels against PyTorch --------------------------------------

LOG_SOFTMAX_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(6, 100) * 4.0]


def get_init_inputs():
    return []
"""

LOG_SOFTMAX_SEED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lsm(src, dst, N, ld, BLK: tl.constexpr):
    """three passes: max, sum of exp, write"""
    r = tl.program_id(0)
    lanes = tl.arange(0, BLK)
    hi = tl.full((BLK,), float("-inf"), dtype=tl.float32)
    for c in range(0, N, BLK):
        hi = tl.maximum(hi, tl.load(src + r * ld + c + lanes, mask=c + lanes < N, other=float("-inf")))
    m = tl.max(hi, axis=0)
    tot = tl.zeros((BLK,), dtype=tl.float32)
    for c in range(0, N, BLK):
        v = tl.load(src + r * ld + c + lanes, mask=c + lanes < N, other=float("-inf"))
        tot += tl.exp(v - m)
    lse = m + tl.log(tl.sum(tot, axis=0))
    for c in range(0, N, BLK):
        ok = c + lanes < N
        v = tl.load(src + r * ld + c + lanes, mask=ok, other=float("-inf"))
        tl.store(dst + r * ld + c + lanes, v - lse, mask=ok)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lsm[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLK=32)
        return y
'''

CENTER_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, r):
        h = x.float() + r.float()
        c = (h - h.mean(dim=-1, keepdim=True)).to(x.dtype)
        return c, (c.float() * c.float()).mean(dim=-1)


def get_inputs():
    return [torch.randn(5, 200, dtype=torch.float16), torch.randn(5, 200, dtype=torch.float16)]


def get_init_inputs():
    return []
"""

CENTER_SEED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def center(x_ptr, r_ptr, y_ptr, var_ptr, n_cols, BLOCK: tl.constexpr):
    """residual add; y = h - mean written, then y read back (after the store) for the variance"""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        h = tl.load(x_ptr + row * n_cols + start + offs, mask=mask, other=0.0).to(tl.float32) \\
            + tl.load(r_ptr + row * n_cols + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += h
    mean = tl.sum(acc, axis=0) / n_cols
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        h = tl.load(x_ptr + row * n_cols + start + offs, mask=mask, other=0.0).to(tl.float32) \\
            + tl.load(r_ptr + row * n_cols + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + start + offs, (h - mean).to(tl.float16), mask=mask)
    sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        c = tl.load(y_ptr + row * n_cols + start + offs, mask=mask, other=0.0).to(tl.float32)
        sq += c * c
    tl.store(var_ptr + row, tl.sum(sq, axis=0) / n_cols)


class ModelNew(nn.Module):
    def forward(self, x, r):
        y = torch.empty_like(x)
        var = torch.empty(x.shape[0], dtype=torch.float32)
        center[(x.shape[0],)](x, r, y, var, x.shape[1], BLOCK=64)
        return y, var
'''


def _check(problem: Path, seed: str) -> str:
    """Rewrite `seed` and evaluate both on the simulator: both must be correct; the rewrite."""
    (m,) = row_mutations(seed)
    new = m.apply(seed)
    assert loops(new, m.kernel) == []
    for code in (seed, new):
        result = evaluate(problem, code, config=SIM)
        assert result.status.value == "ok", f"{m.name}: {result.status} {result.message}\n{code}"
    return new


def test_rewritten_log_softmax_and_store_separated_passes_are_correct(tmp_path: Path) -> None:
    (tmp_path / "lsm.py").write_text(LOG_SOFTMAX_PROBLEM)
    new = _check(tmp_path / "lsm.py", LOG_SOFTMAX_SEED)
    assert len(loads(new, "lsm")) == 1 and "BLK=triton.next_power_of_2(x.shape[1])" in new
    (tmp_path / "center.py").write_text(CENTER_PROBLEM)
    new = _check(tmp_path / "center.py", CENTER_SEED)
    assert len(loads(new, "center")) == 3  # x and r once each; y read back after its store


@pytest.mark.slow
@pytest.mark.parametrize(
    "folder",
    [
        PRODUCTION / "layer_norm_bf16",
        PRODUCTION / "rms_norm_fp16",
        DEFAULT / "softmax",
        DEFAULT / "cumsum",  # a running prefix carried from chunk to chunk
    ],
    ids=lambda p: p.name,
)
def test_rewritten_suite_seeds_are_correct(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.03")
    _check(folder / "problem.py", (folder / "seed.py").read_text())


OVERSIZED_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(2, 65536)]


def get_init_inputs():
    return []
"""


def test_a_row_that_does_not_fit_the_local_store_is_rejected_at_compile_time(tmp_path: Path) -> None:
    from kegen.search.screening_probe import probe

    problem = tmp_path / "wide_softmax.py"
    problem.write_text(OVERSIZED_PROBLEM)
    seed = (DEFAULT / "softmax" / "seed.py").read_text()
    (m,) = row_mutations(seed)
    over = probe(problem, m.apply(seed), "mtia-2i", salt=b"s")
    assert over.status == "compile_error", over
    # the lowering's own message: which kernel, which block, how much is live, what to do
    assert "LocalStoreOverflowError" in over.message and "softmax_kernel" in over.message
    assert "do not fit in the local store" in over.message and "65536xf32" in over.message
    assert "shrink the block sizes" in over.message
