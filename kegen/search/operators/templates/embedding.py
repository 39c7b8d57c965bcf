"""Triton template for embedding bags with offsets (sum / mean pooling): the segment gather.

One program pools BAG_GROUP consecutive bags. Their rows are contiguous in `indices`
(`offsets[b] .. offsets[b + 1]`), so the program walks that one index range in steps of ROW_BLOCK
positions across bag boundaries: one index load, one DMA gather of ROW_BLOCK table rows, and one
matmul of the bags' membership mask ([BAG_GROUP, ROW_BLOCK], 0/1 in the table's dtype) with the
rows accumulates every bag of the group at once in fp32 on the dot-product unit. The mean's
division by the bag size is applied to the accumulator before the single store. Empty bags give 0,
as torch's do. `LAST` is True when `offsets` ends with the total (`include_last_offset=True`); else
the last bag ends at `n_idx`. The group's index range comes from two scalar loads (a reduction
over the bag ends would make the control core fence on it). The gather's pointers are the row
start (from the index) plus unit-stride columns and its mask is a box (positions < the range end,
columns < dim), so on MTIA it is one row gather: one address per row, each row read as a
contiguous run (`GatherForm.ROWS`), no [rows, dim] address tile.
"""

from __future__ import annotations

from collections.abc import Sequence

from kegen.search.operators.templates import HEADER

BAG_GROUP, ROW_BLOCK = 16, 64  # the tuned defaults on mtia-2i (docs/results/memory_moves_mtia.md)

_KERNEL = """
@triton.jit
def {name}(w_ptr, idx_ptr, off_ptr, y_ptr, num_bags, n_idx, dim,{w} LAST: tl.constexpr, MEAN: tl.constexpr,
{pad}BAGS: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    bags = pid * BAGS + tl.arange(0, BAGS)
    bmask = bags < num_bags
    starts = tl.load(off_ptr + bags, mask=bmask, other=0)
    lo = tl.load(off_ptr + pid * BAGS)
    last = tl.minimum(pid * BAGS + BAGS, num_bags)  # the group's end: the next group's start
    if LAST:
        ends = tl.load(off_ptr + bags + 1, mask=bmask, other=0)
        hi = tl.load(off_ptr + last)
    else:
        ends = tl.load(off_ptr + bags + 1, mask=bags + 1 < num_bags, other=n_idx)
        hi = tl.load(off_ptr + tl.minimum(last, num_bags - 1))
        hi = tl.where(last >= num_bags, n_idx, hi)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < dim
    acc = tl.zeros((BAGS, BLOCK_D), dtype=tl.float32){cnt4}
    for s in range(lo, hi, ROWS):
        pos = s + tl.arange(0, ROWS)
        pmask = pos < hi
        rows = tl.load(idx_ptr + pos, mask=pmask, other=0)
        starts_of_rows = rows.to(tl.int64) * dim
        vals = tl.load(w_ptr + starts_of_rows[:, None] + cols[None, :], mask=pmask[:, None] & cmask[None, :],
                       other=0.0)
        member = (pos[None, :] >= starts[:, None]) & (pos[None, :] < ends[:, None])
{pool8}
    if MEAN:
        acc = acc / {count}[:, None]
    tl.store(y_ptr + bags[:, None] * dim + cols[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=bmask[:, None] & cmask[None, :])
"""


# balanced form: the least offsets per fine step (the launch takes ~sqrt(bags)); programs (64 PEs x 2 cores)
BAG_FINE, BAG_PROGRAMS = 32, 128
BAG_PREFETCH = 16  # balanced form's prefetch variant: rows per program gathered ahead (0: none)

# The balanced form: a fixed number of programs (one per core) and each takes the bags whose first
# index falls in its equal share of all indices, so every core gathers about as many rows whatever
# the bag sizes (groups of BAG_GROUP consecutive bags give cores 0.7-1.3x the mean on long-tailed
# sizes, and the last core to finish sets the time). A program finds its first bag with two small
# loads instead of reading every offset: every FINE-th offset (the coarse step containing its share's
# start), then the FINE offsets of that step. It then walks its bags BAGS at a time exactly as the
# segment gather does (one store per chunk). The search is a chain of dependent loads (~2 us on
# mtia-2i) with the DRAM idle, so first the upper half of the programs (the second core of each PE
# under dual core) gathers the first PREFETCH rows of its own share and of the program nprog // 2
# below (its PE mate) and drops them: the rows stay in the memory-side SRAM cache, where the real
# gathers find them. One gather per PE: the DMA engine starts commands in order, and a second
# would queue the search's loads behind it. Correct whatever it fetches (nothing reads it); it pays
# where the search's idle DRAM time is a large share of the kernel (fp16 sum bags: 22.3 -> 21.6 us),
# not everywhere (fp32 mean bags: 55.4 -> 56.5 us), so it is a variant of the move.
_BALANCED = """
@triton.jit
def {name}(w_ptr, idx_ptr, off_ptr, y_ptr, num_bags, n_idx, dim,{w} LAST: tl.constexpr, MEAN: tl.constexpr,
{pad}BAGS: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, FINE: tl.constexpr,
{pad}COARSE: tl.constexpr, PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if LAST:
        total = tl.load(off_ptr + num_bags).to(tl.int64)
    else:
        total = n_idx.to(tl.int64)
    share_lo = pid * total // nprog  # this program's bags: those starting in [share_lo, share_hi)
    share_hi = (pid + 1) * total // nprog
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < dim
    if PREFETCH > 0 and pid >= nprog // 2:  # warm the SRAM cache during the search (result unused)
        ahead = tl.arange(0, 2 * PREFETCH)
        mate_lo = (pid - nprog // 2) * total // nprog
        ahead = tl.where(ahead < PREFETCH, share_lo + ahead, mate_lo + ahead - PREFETCH)
        ahead_rows = tl.load(idx_ptr + ahead, mask=ahead < total, other=0)
        tl.load(w_ptr + ahead_rows.to(tl.int64)[:, None] * dim + cols[None, :],
                mask=(ahead < total)[:, None] & cmask[None, :], other=0.0, volatile=True)
    steps = tl.arange(0, COARSE) * FINE
    coarse = tl.load(off_ptr + steps, mask=steps < num_bags, other=total)
    step_lo = tl.maximum(tl.sum((coarse < share_lo).to(tl.int32)) - 1, 0) * FINE
    step_hi = tl.maximum(tl.sum((coarse < share_hi).to(tl.int32)) - 1, 0) * FINE
    fine_lo = step_lo + tl.arange(0, FINE)
    fine_hi = step_hi + tl.arange(0, FINE)
    first_lo = tl.load(off_ptr + fine_lo, mask=fine_lo < num_bags, other=total)
    first_hi = tl.load(off_ptr + fine_hi, mask=fine_hi < num_bags, other=total)
    b0 = step_lo + tl.sum((first_lo < share_lo).to(tl.int32))
    b1 = step_hi + tl.sum((first_hi < share_hi).to(tl.int32))
    b1 = tl.where(pid == nprog - 1, num_bags, b1)  # empty bags at the end start at the total
    for c in range(b0, b1, BAGS):
        bags = c + tl.arange(0, BAGS)
        bmask = bags < b1
        starts = tl.load(off_ptr + bags, mask=bmask, other=0)
        lo = tl.load(off_ptr + c)
        last = tl.minimum(c + BAGS, b1)
        if LAST:
            ends = tl.load(off_ptr + bags + 1, mask=bmask, other=0)
            hi = tl.load(off_ptr + last)
        else:
            ends = tl.load(off_ptr + bags + 1, mask=bags + 1 < num_bags, other=n_idx)
            hi = tl.load(off_ptr + tl.minimum(last, num_bags - 1))
            hi = tl.where(last >= num_bags, n_idx, hi)
        acc = tl.zeros((BAGS, BLOCK_D), dtype=tl.float32){cnt8}
        for s in range(lo, hi, ROWS):
            pos = s + tl.arange(0, ROWS)
            pmask = pos < hi
            rows = tl.load(idx_ptr + pos, mask=pmask, other=0)
            starts_of_rows = rows.to(tl.int64) * dim
            vals = tl.load(w_ptr + starts_of_rows[:, None] + cols[None, :],
                           mask=pmask[:, None] & cmask[None, :], other=0.0)
            member = (pos[None, :] >= starts[:, None]) & (pos[None, :] < ends[:, None])
{pool12}
        if MEAN:
            acc = acc / {count}[:, None]
        tl.store(y_ptr + bags[:, None] * dim + cols[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=bmask[:, None] & cmask[None, :])
"""
BALANCED_MARKER = "share_lo = pid * total // nprog"


# the rows of a bag summed by a dot with its 0/1 membership: in the table's dtype, accumulated in float32.
# A float32 table needs exact dots on NVIDIA (TF32 put bags ~1e-3 off the reference on an H100): its
# drafts state them (`dot_precision.for_target`) and every move keeps them; an fp16/bf16 table keeps
# Triton's default (Triton 3.6 runs an fp16 "ieee" dot on FMA units)
_POOL = "acc += tl.dot(member.to(vals.dtype), vals)"
# per-sample weights (mode "sum"): the membership mask carries each position's weight
_WEIGHTED_POOL = (
    "wts = tl.load(psw_ptr + pos, mask=pmask, other=0.0)\n"
    "{ind}acc += tl.dot(member.to(vals.dtype) * wts.to(vals.dtype)[None, :], vals)"
)
WEIGHTS_PARAM = "psw_ptr"


_PADDED = (  # entries at the padding index do not count (mean: nor in the bag's size)
    "member = member & (rows != pad_idx)[None, :]\n"
    "{ind}if MEAN:\n"
    "{ind}    cnt += tl.sum(member.to(tl.float32), axis=1)\n"
)
PAD_PARAM = "pad_idx"


def _fill(template: str, name: str, weighted: bool, padded: bool = False) -> str:
    parts = {}  # the pooling statement, the count's initial value, per indentation
    for key, ind in (("pool8", " " * 8), ("pool12", " " * 12)):
        pool = _WEIGHTED_POOL.format(ind=ind) if weighted else _POOL
        parts[key] = ind + (_PADDED.format(ind=ind) + ind if padded else "") + pool
    for key, ind in (("cnt4", " " * 4), ("cnt8", " " * 8)):
        parts[key] = f"\n{ind}cnt = tl.zeros((BAGS,), dtype=tl.float32)" if padded else ""
    count = "tl.maximum(cnt, 1.0)" if padded else "tl.maximum(ends - starts, 1).to(tl.float32)"
    wparam = (f" {WEIGHTS_PARAM}," if weighted else "") + (f" {PAD_PARAM}," if padded else "")
    return template.format(name=name, pad=" " * (len(name) + 5), w=wparam, count=count, **parts)


def balanced_kernel(name: str = "embedding_bag_kernel", weighted: bool = False, padded: bool = False) -> str:
    """The balanced segment gather's source under `name` (same operands as `bag_kernel`, plus the
    constexprs FINE, COARSE = next_power_of_2(cdiv(num_bags, FINE)) and PREFETCH (rows gathered ahead
    per program: 0 or a power of two); launch BAG_PROGRAMS programs)."""
    return _fill(_BALANCED, name, weighted, padded)


def bag_kernel(name: str = "embedding_bag_kernel", weighted: bool = False, padded: bool = False) -> str:
    """The segment-gather kernel's source under `name` (a top-level `@triton.jit` function); with
    `weighted`, a `psw_ptr` operand after `dim` (one weight per index, sum pooling); with `padded`,
    then a `pad_idx` operand (entries equal to it are left out, and out of a mean's count)."""
    return _fill(_KERNEL, name, weighted, padded)


def bag_launch(
    name: str,
    operands: Sequence[str],
    mean: bool,
    last: bool,
    indent: str = "",
    weights: str | None = None,
    padding_idx: int | None = None,
) -> str:
    """The launch of `bag_kernel(name)` (two lines, the second indented by `indent` + 4) over the
    caller's expressions `operands` = (table, idx, off, out, num_bags, n_idx, dim); the table and
    the output are contiguous [*, dim], `idx` and `off` 1-D; `weights` (1-D, one per index) for
    `bag_kernel(name, weighted=True)`; `padding_idx` for `bag_kernel(name, padded=True)`."""
    table, idx, off, out, num_bags, n_idx, dim = operands
    w = f" {weights}," if weights is not None else ""
    w += f" {padding_idx}," if padding_idx is not None else ""
    return (
        f"{name}[(triton.cdiv({num_bags}, BAG_GROUP),)]({table}, {idx}, {off}, {out}, {num_bags}, {n_idx}, "
        f"{dim},{w}\n{indent}    LAST={last}, MEAN={mean}, BAGS=BAG_GROUP, ROWS=ROW_BLOCK, "
        f"BLOCK_D=triton.next_power_of_2({dim}))"
    )


def constants(bags: int = BAG_GROUP, rows: int = ROW_BLOCK) -> str:
    """The module constants the launch reads (tuned by the block-size knobs)."""
    return f"BAG_GROUP = {bags}\nROW_BLOCK = {rows}\n"


def embedding_bag(
    args: Sequence[str],
    table: str,
    idx: str,
    off: str,
    mean: bool,
    last: bool,
    dtype: str | None = None,
    init: Sequence[str] = (),
    bags: int = BAG_GROUP,
    rows: int = ROW_BLOCK,
    weights: str | None = None,
    padding_idx: int | None = None,
) -> str:
    """A whole candidate: F.embedding_bag(idx, table, off, mode='mean' if mean else 'sum',
    include_last_offset=last, per_sample_weights=weights, padding_idx=padding_idx) over 1-D indices;
    `table`, `idx`, `off`, `weights` are forward-time expressions over `args`, `dtype` the output's
    (default the table's), `init` rebuilds the model's parameters."""
    if weights is not None and mean:
        raise ValueError("per-sample weights pool by sum only (as torch's embedding_bag)")
    init_body = "\n".join(f"        {line}" for line in ("super().__init__()", *init))
    operands = ("table", "idx", "off", "y", "num_bags", "idx.numel()", "table.shape[1]")
    psw = "psw" if weights is not None else None
    launch = bag_launch("embedding_bag_kernel", operands, mean, last, " " * 8, psw, padding_idx)
    out_dtype = dtype or "table.dtype"
    body = (
        f"        table = {table}.contiguous()\n"
        f"        idx = {idx}.reshape(-1).contiguous()\n"
        + (f"        psw = {weights}.reshape(-1).contiguous()\n" if weights is not None else "")
        + f"        off = {off}.contiguous()\n"
        f"        num_bags = off.numel() - {int(last)}\n"
        f"        y = torch.empty((num_bags, table.shape[1]), dtype={out_dtype}, device=table.device)\n"
        f"        {launch}\n"
        "        return y"
    )
    return (
        HEADER
        + "\n"
        + constants(bags, rows)
        + "\n"
        + bag_kernel(weighted=weights is not None, padded=padding_idx is not None)
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        + f"{init_body}\n\n    def forward(self, {', '.join(args)}):\n{body}\n"
    )
