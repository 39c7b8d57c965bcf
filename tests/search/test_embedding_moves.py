"""Embedding bags with offsets: the segment-gather move (mutations/embedding.py), its template
(templates/embedding.py) and the EmbeddingBag drafter (drafting/gather.py).

AST-level: which kernels the move recognises (the production seeds, sum and mean) and which it
leaves alone; what the drafter writes for nn.EmbeddingBag and F.embedding_bag and what it refuses.
Simulated: the rewritten seeds and the drafts are correct against PyTorch on bags of length 0, 1,
ROW_BLOCK - 1, ROW_BLOCK, ROW_BLOCK + 1 and longer, a bag count BAG_GROUP does not divide, a row
width that is not a power of two, with and without include_last_offset.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.embedding import balance_mutations, embedding_mutations, rewrite
from kegen.search.operators.templates import embedding
from kegen.suites import find_suite

PRODUCTION = {p.name: p for p in find_suite("production").problems}
BAG_SEEDS = ("embedding_bag_sum_fp16", "embedding_bag_mean_fp32")
R = embedding.ROW_BLOCK
LENGTHS = (0, 1, R - 1, R, R + 1, 3, 0, 2 * R + 5, 7, 1, 0, 5) * 2 + (4, 9, 0)  # 27 bags: not a multiple


def _kernel_calls(src: str, name: str) -> list[str]:
    return [
        ast.unparse(n)
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
    ]


@pytest.mark.parametrize("name", BAG_SEEDS)
def test_the_production_seeds_become_the_segment_gather(name: str) -> None:
    seed = PRODUCTION[name].seed_path.read_text()
    (m,) = embedding_mutations(seed)
    assert m.family == "embedding_bag" and m.kernel == "embedding_bag_kernel"
    out = m.apply(seed)
    ast.parse(out)
    assert "BAG_GROUP = 16\nROW_BLOCK = 64\n" in out
    assert "embedding_bag_kernel[(triton.cdiv(num_bags, BAG_GROUP),)]" in out
    assert f"MEAN={'mean' in name}" in out and "LAST=True" in out
    # the table's dtype, float32 accumulation; the search states exact dots where the GPU defaults to TF32
    assert _kernel_calls(out, "dot") == ["tl.dot(member.to(vals.dtype), vals)"]
    assert "for i in range(start, end)" not in out  # the row loop is gone
    assert {m.family for m in embedding_mutations(out)} == {"embedding_bag_group"}  # no second rewrite


def _module(body: str, launch: str = "k[(off.numel() - 1,)](w, idx, off, y, w.shape[1], BLOCK=64)") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(w_ptr, idx_ptr, off_ptr, y_ptr, dim, BLOCK: tl.constexpr):\n"
        "    bag = tl.program_id(0)\n    start = tl.load(off_ptr + bag)\n    end = tl.load(off_ptr + bag + 1)\n"
        f"    cols = tl.arange(0, BLOCK)\n    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n{body}\n\n\n"
        f"def run(w, idx, off, y):\n    {launch}\n"
    )


BAG_LOOP = """
for i in range(start, end):
    row = tl.load(idx_ptr + i)
    acc += tl.load(w_ptr + row * dim + cols, mask=cols < dim, other=0.0)
tl.store(y_ptr + bag * dim + cols, acc, mask=cols < dim)
"""


def test_a_bag_loop_with_free_names_is_recognised_and_its_launch_rewritten() -> None:
    src = _module(BAG_LOOP)
    (m,) = embedding_mutations(src)
    out = m.apply(src)
    assert "k[(triton.cdiv(off.numel() - 1, BAG_GROUP),)](w, idx, off, y, off.numel() - 1, 0, w.shape[1]," in out
    assert "MEAN=False" in out


@pytest.mark.parametrize(
    ("body", "launch"),
    [
        # rows read directly (a jagged sum, not a gather through indices)
        (BAG_LOOP.replace("row = tl.load(idx_ptr + i)", "row = i"), None),
        # another statement after the loop (a second output) is not the pooled bag
        (BAG_LOOP + "tl.store(y_ptr + bag, acc.sum())\n", None),
        # the store is not one row per bag
        (BAG_LOOP.replace("y_ptr + bag * dim", "y_ptr + bag"), None),
        # a two-axis grid
        (BAG_LOOP, "k[(off.numel() - 1, 2)](w, idx, off, y, w.shape[1], BLOCK=64)"),
    ],
)
def test_other_loops_are_left_alone(body: str, launch: str | None) -> None:
    src = _module(body, launch) if launch else _module(body)
    if launch is None:
        assert embedding_mutations(src) == []
    else:
        (m,) = embedding_mutations(src)
        with pytest.raises(MutationError, match="one-axis grid"):
            m.apply(src)
    with pytest.raises(MutationError):
        rewrite(src, "no_such_kernel")


PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

LENGTHS = {lengths}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return {expr}


def get_inputs():
    lengths = torch.tensor(LENGTHS)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    if not {last}:
        offsets = offsets[:-1]
    indices = torch.randint(0, 300, (int(lengths.sum()),))
    return [{inputs}]


def get_init_inputs():
    return []
"""


def _problem(tmp_path: Path, kind: str, mode: str, last: bool, dim: int = 48) -> Path:
    if kind == "module":
        init = f"        self.bag = nn.EmbeddingBag(300, {dim}, mode={mode!r}, include_last_offset={last})"
        args, expr, inputs = "indices, offsets", "self.bag(indices, offsets)", "indices, offsets"
    else:
        init, args = "        pass", "weight, indices, offsets"
        expr = f"F.embedding_bag(indices, weight, offsets, mode={mode!r}, include_last_offset={last})"
        inputs = f"torch.randn(300, {dim}, dtype=torch.float16).float(), indices, offsets"
    text = PROBLEM.format(lengths=LENGTHS, init=init, args=args, expr=expr, inputs=inputs, last=last)
    path = tmp_path / f"bag_{kind}_{mode}_{last}.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("kind", "mode", "last"), [("module", "mean", False), ("function", "sum", True)])
def test_embedding_bags_are_drafted_as_the_segment_gather(
    kind: str, mode: str, last: bool, tmp_path: Path
) -> None:
    a = analyze(_problem(tmp_path, kind, mode, last))
    assert a.op_class == "embedding" and a.source is not None, a.summary
    assert f"LAST={last}, MEAN={mode == 'mean'}" in a.source
    if kind == "module":
        assert f"self.bag = nn.EmbeddingBag(300, 48, mode={mode!r})" in a.source
        assert "table = self.bag.weight.detach().contiguous()" in a.source


def test_max_pooling_is_not_drafted(tmp_path: Path) -> None:
    a = analyze(_problem(tmp_path, "function", "max", False))
    assert a.op_class != "embedding"
    assert any("mode='max'" in n for n in a.unsupported), a.unsupported


def _evaluate(problem: Path, source: str) -> None:
    from kegen.eval import EvalConfig, evaluate

    cfg = EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True)
    assert (r := evaluate(problem, source, config=cfg)).status.value == "ok", f"{r.status} {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "mode", "last"), [("module", "mean", False), ("function", "sum", True)])
def test_drafted_bags_are_correct_on_the_simulator(kind: str, mode: str, last: bool, tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    problem = _problem(tmp_path, kind, mode, last)
    source = analyze(problem).source
    assert source is not None
    _evaluate(problem, source.replace("BAG_GROUP = 16", "BAG_GROUP = 4"))  # groups straddle the long bags


@pytest.mark.slow
@pytest.mark.parametrize("name", BAG_SEEDS)
def test_rewritten_seeds_are_correct_on_the_simulator(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mtia_sim.simulator")
    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.02")
    text = PRODUCTION[name].problem_path.read_text()
    dtype = "torch.float16" if "fp16" in name else "torch.float32"
    inputs = (
        "\n\ndef get_inputs():\n"
        f"    lengths = torch.tensor({list(LENGTHS)})\n"
        "    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])\n"
        "    indices = _zipf_rows(int(offsets[-1]), NUM_EMBEDDINGS)\n"
        f"    return [torch.randn(NUM_EMBEDDINGS, EMBEDDING_DIM, dtype={dtype}), indices, offsets]\n"
    )
    problem = tmp_path / f"{name}.py"
    problem.write_text(text + inputs)
    seed = PRODUCTION[name].seed_path.read_text()
    _evaluate(problem, rewrite(seed, "embedding_bag_kernel", bags=8, rows=R))


def test_a_segment_gather_in_place_offers_fewer_bags_per_program_for_parallelism(tmp_path: Path) -> None:
    source = analyze(_problem(tmp_path, "module", "mean", False)).source
    assert source is not None
    moves = {m.name: m for m in embedding_mutations(source)}
    assert set(moves) == {"BAG_GROUP=8@module", "BAG_GROUP=32@module"}  # no second rewrite of the kernel
    assert "parallelism" in moves["BAG_GROUP=8@module"].remedies
    assert "BAG_GROUP = 8\n" in moves["BAG_GROUP=8@module"].apply(source)


def test_a_segment_gather_offers_the_balanced_form_once(tmp_path: Path) -> None:
    source = analyze(_problem(tmp_path, "function", "sum", True)).source
    assert source is not None
    moves = balance_mutations(source)
    assert [m.name for m in moves] == [
        "bag_balance@embedding_bag_kernel", "bag_balance+prefetch@embedding_bag_kernel"
    ]
    out = moves[0].apply(source)
    assert embedding.BALANCED_MARKER in out
    assert "embedding_bag_kernel[BAG_PROGRAMS,](" in out and "dual_core=True" in out
    fine = "max(BAG_FINE, triton.next_power_of_2(int(num_bags ** 0.5)))"
    assert f"FINE={fine}, COARSE=triton.next_power_of_2(triton.cdiv(num_bags, {fine}))" in out
    assert "PREFETCH=BAG_PREFETCH" in out
    assert "BAG_GROUP = 32\nROW_BLOCK = 16\nBAG_FINE = 32\nBAG_PROGRAMS = 128\nBAG_PREFETCH = 0\n" in out
    assert f"BAG_PREFETCH = {embedding.BAG_PREFETCH}\n" in moves[1].apply(source)
    assert balance_mutations(out) == []  # balanced already
    assert {m.name for m in embedding_mutations(out)} == {"BAG_GROUP=16@module", "BAG_GROUP=64@module"}
    seed = PRODUCTION["embedding_bag_sum_fp16"].seed_path.read_text()
    assert balance_mutations(seed) == []  # a bag-per-program loop takes the segment gather first


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "mode", "last", "consts", "variant"),
    [
        # a few programs, each walking several chunks, two fine steps of offsets
        ("module", "mean", False, {"BAG_PROGRAMS": 5, "BAG_GROUP": 4, "BAG_FINE": 4, "ROW_BLOCK": 8}, 0),
        # more programs than bags: most take none; the trailing empty bag goes to the last one
        ("function", "sum", True, {}, 0),
        # the prefetch: an odd program count (the mate below), rows ahead past the last index
        ("module", "mean", False, {"BAG_PROGRAMS": 7, "BAG_GROUP": 4, "BAG_FINE": 4, "BAG_PREFETCH": 32}, 1),
        ("function", "sum", True, {}, 1),
    ],
)
def test_balanced_bags_are_correct_on_the_simulator(
    kind: str, mode: str, last: bool, consts: dict[str, int], variant: int, tmp_path: Path
) -> None:
    pytest.importorskip("mtia_sim.simulator")
    problem = _problem(tmp_path, kind, mode, last)
    source = analyze(problem).source
    assert source is not None
    out = balance_mutations(source)[variant].apply(source)
    for name, value in consts.items():
        out, n = re.subn(rf"^{name} = \d+$", f"{name} = {value}", out, flags=re.M)
        assert n == 1, name
    _evaluate(problem, out)


FIXED_LENGTH_PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(300, 40, mode={mode!r})

    def forward(self, indices):
        return {expr}


def get_inputs():
    return [torch.randint(0, 300, ({rows}, {length}))]


def get_init_inputs():
    return []
"""


def _fixed_length(tmp_path: Path, mode: str, length: int, functional: bool = False) -> Path:
    expr = f"F.embedding_bag(indices, self.bag.weight, mode={mode!r})" if functional else "self.bag(indices)"
    path = tmp_path / f"bag2d_{mode}_{length}_{functional}.py"
    path.write_text(FIXED_LENGTH_PROBLEM.format(mode=mode, expr=expr, rows=37, length=length))
    return path


@pytest.mark.parametrize("functional", [False, True])
def test_two_dimensional_indices_are_drafted_as_fixed_length_bags(functional: bool, tmp_path: Path) -> None:
    a = analyze(_fixed_length(tmp_path, "sum", 5, functional))
    assert a.op_class == "embedding" and a.source is not None, a.summary
    assert "torch.arange(0, indices.numel(), indices.shape[1], device=indices.device)" in a.source
    assert "LAST=False, MEAN=False" in a.source


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "length"), [("mean", 5), ("sum", 3)])
def test_fixed_length_bags_are_correct_on_the_simulator(mode: str, length: int, tmp_path: Path) -> None:
    """37 bags of 5 or 3 rows: groups of 4 bags straddle the row blocks."""
    pytest.importorskip("mtia_sim.simulator")
    problem = _fixed_length(tmp_path, mode, length)
    source = analyze(problem).source
    assert source is not None
    _evaluate(problem, source.replace("BAG_GROUP = 16", "BAG_GROUP = 4"))


WEIGHTED_PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(300, 40, mode="sum").to({dtype})

    def forward(self, indices, offsets, weights):
        return {expr}


def get_inputs():
    lengths = torch.tensor({lengths})
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)[:-1]])
    n = int(lengths.sum())
    return [torch.randint(0, 300, (n,)), offsets, torch.rand(n, dtype={dtype})]


def get_init_inputs():
    return []
"""


def _weighted(tmp_path: Path, functional: bool, dtype: str = "torch.float32") -> Path:
    expr = (
        "F.embedding_bag(indices, self.bag.weight, offsets, mode='sum', per_sample_weights=weights)"
        if functional
        else "self.bag(indices, offsets, per_sample_weights=weights)"
    )
    path = tmp_path / f"bag_weighted_{functional}.py"
    path.write_text(WEIGHTED_PROBLEM.format(expr=expr, lengths=list(LENGTHS), dtype=dtype))
    return path


@pytest.mark.parametrize("functional", [False, True])
def test_per_sample_weights_are_drafted_into_the_membership_mask(functional: bool, tmp_path: Path) -> None:
    a = analyze(_weighted(tmp_path, functional))
    assert a.op_class == "embedding" and a.source is not None, a.summary
    assert "n_idx, dim, psw_ptr, LAST: tl.constexpr" in a.source
    assert "acc += tl.dot(member.to(vals.dtype) * wts.to(vals.dtype)[None, :], vals)" in a.source
    assert "psw = weights.reshape(-1).contiguous()" in a.source
    for m in balance_mutations(a.source):  # the balanced forms keep the weights
        out = m.apply(a.source)
        assert "n_idx, dim, psw_ptr, LAST: tl.constexpr" in out and "wts.to(vals.dtype)" in out


@pytest.mark.slow
def test_weighted_bags_are_correct_on_the_simulator(tmp_path: Path) -> None:
    """fp16 table and weights, the segment gather (groups of 4 bags straddling the long bags) and
    its balanced form."""
    pytest.importorskip("mtia_sim.simulator")
    problem = _weighted(tmp_path, False, "torch.float16")
    source = analyze(problem).source
    assert source is not None
    _evaluate(problem, source.replace("BAG_GROUP = 16", "BAG_GROUP = 4"))
    for m in balance_mutations(source):  # without and with the prefetch
        _evaluate(problem, m.apply(source))


PADDED_PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(300, 40, mode={mode!r}, padding_idx=3)

    def forward(self, indices, offsets):
        return {expr}


def get_inputs():
    indices = torch.randint(0, 8, (500,))  # index 3 about one time in eight
    indices[100:140] = 3  # a bag of padding only: 0, and no division by zero in a mean
    return [indices, torch.tensor([0, 5, 100, 140, 141, 300, 499])]


def get_init_inputs():
    return []
"""


def _padded(tmp_path: Path, mode: str, functional: bool) -> Path:
    expr = (
        f"F.embedding_bag(indices, self.bag.weight, offsets, mode={mode!r}, padding_idx=3)"
        if functional
        else "self.bag(indices, offsets)"
    )
    path = tmp_path / f"bag_padded_{mode}_{functional}.py"
    path.write_text(PADDED_PROBLEM.format(mode=mode, expr=expr))
    return path


@pytest.mark.parametrize(("mode", "functional"), [("mean", False), ("sum", True)])
def test_a_padding_index_is_drafted_out_of_the_membership_mask(mode: str, functional: bool, tmp_path: Path) -> None:
    a = analyze(_padded(tmp_path, mode, functional))
    assert a.op_class == "embedding" and a.source is not None, a.summary
    assert "n_idx, dim, pad_idx, LAST: tl.constexpr" in a.source
    assert "member = member & (rows != pad_idx)[None, :]" in a.source
    assert "acc = acc / tl.maximum(cnt, 1.0)[:, None]" in a.source
    assert "self.bag = nn.EmbeddingBag(300, 40, mode=" in a.source and "padding_idx=3)" in a.source
    for m in balance_mutations(a.source):
        assert "n_idx, dim, pad_idx, LAST: tl.constexpr" in m.apply(a.source)


@pytest.mark.slow
def test_padded_mean_bags_are_correct_on_the_simulator(tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    problem = _padded(tmp_path, "mean", False)
    source = analyze(problem).source
    assert source is not None
    _evaluate(problem, source.replace("BAG_GROUP = 16", "BAG_GROUP = 4"))
    for m in balance_mutations(source):  # without and with the prefetch
        _evaluate(problem, m.apply(source))
