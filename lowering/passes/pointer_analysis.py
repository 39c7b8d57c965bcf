"""Pointer analysis: recover block accesses from addptr/splat/broadcast/make_range chains.

For every `tt.load` / `tt.store` whose pointer tensor is `base + sum_k coef_k * index_k + offset`
(base: one scalar pointer; coefs and offset: scalar expressions of kernel scalars) and whose mask
is a conjunction of `index_k + c < bound` comparisons and uniform scalar conditions, the pass
records a `BlockAccess`: the code generator emits one strided DMA_COPY with `valid` bounds.
A load whose pointers are `base + rows + affine` with `rows` a tensor constant along the inner axis
(e.g. loaded indices `idx[:, None] * stride`) and unit-stride columns is a `RowAccess`: one address
per row and one row-gather DMA (`GatherForm.ROWS`); its mask may be a box, a row tensor
(`(row condition)[:, None]`) ANDed with a box, or any tensor. Anything else (indirect indices in
every dim, modulo, ...) is left to the per-element gather/scatter fallback.
With `accumulate`, a `tt.atomic_rmw` that `lowering.analysis.accumulate` can turn into one
RED_ACCUMULATE gets a `BlockAccess` too when its pointers are affine and its mask is a box or absent.
The pass also computes which tensor values must be materialised in the local store at all
(`buffer_demand`); its expressions, forms and results are in `pointer_forms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lowering.analysis.accumulate import accumulate_form
from lowering.ir.attributes import DenseAttr
from lowering.ir.core import Operation, Value
from lowering.ir.module import Function, Module
from lowering.passes.buffer_demand import demand_buffers
from lowering.passes.manager import Pass, PassContext
from lowering.passes.pointer_forms import (
    ONE,
    ZERO,
    Affine,
    BlockAccess,
    CarriedPointer,
    MaskInfo,
    PointerInfo,
    RowAccess,
    SExpr,
    s_add,
    s_mul,
    s_neg,
    s_sub,
)


def _splat_const(op: Operation) -> int | float | None:
    val = op.attr("value")
    if isinstance(val, DenseAttr):
        arr = np.asarray(val.value)
        if arr.size and (arr == arr.flat[0]).all():
            x = arr.flat[0]
            return (
                bool(x)
                if arr.dtype == bool
                else (int(x) if np.issubdtype(arr.dtype, np.integer) else float(x))
            )
        return None
    return None


@dataclass(frozen=True)
class PointerAnalysis(Pass):
    """Pass (analysis): affine block accesses of the kernel (result: `PointerInfo`).
    `block_dma=False` forces the gather/scatter fallback; `red_accumulate` lets block atomics with
    unused results become RED_ACCUMULATE."""

    name: ClassVar[str] = "pointer-analysis"
    requires: ClassVar[tuple[str, ...]] = ("inline-calls",)
    analysis: ClassVar[bool] = True
    block_dma: bool = True
    red_accumulate: bool = True  # a search option, declared by unit-mapping
    row_gather: bool = True  # loads of indirect rows with affine columns -> GatherForm.ROWS

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = analyze_pointers(
            ctx.kernel, self.block_dma, self.red_accumulate, self.row_gather
        )


def analyze_pointers(
    fn: Function, enabled: bool = True, accumulate: bool = True, row_gather: bool = True
) -> PointerInfo:
    """The `PointerInfo` of `fn` (`enabled=False`: no block accesses or row gathers at all)."""
    return _PointerAnalyzer(enabled, accumulate, row_gather).run(fn)


class _PointerAnalyzer:
    def __init__(self, enabled: bool, accumulate: bool, row_gather: bool = True) -> None:
        self.enabled = enabled
        self.accumulate = accumulate  # block atomics with unused results -> RED_ACCUMULATE
        self.row_gather = row_gather

    def run(self, fn: Function) -> PointerInfo:
        ops = list(fn.walk())
        excluded: set[int] = set()
        while True:
            info = PointerInfo()
            aff: dict[int, Affine] = {}
            masks: dict[int, MaskInfo] = {}
            candidates: dict[int, CarriedPointer] = {}
            if self.enabled:
                for op in ops:
                    if op.name == "scf.for":
                        self._carry(op, aff, candidates, excluded)
                    self._visit(op, aff, masks)
                for op in ops:
                    if op.name in ("tt.load", "tt.store") and op.operands[0].type.is_tensor:
                        acc = self._access(op, aff, masks)
                        if isinstance(acc, RowAccess):
                            info.rows[id(op)] = acc
                            for v in acc.values():
                                info.row_values[id(v)] = info.row_values.get(id(v), 0) + 1
                        elif acc is not None:
                            info.accesses[id(op)] = acc
                    elif self._accumulable(op):
                        acc = self._access(op, aff, masks)
                        if isinstance(acc, BlockAccess) and not acc.mask_tensor:
                            info.accesses[id(op)] = acc
                self._validate_carried(ops, aff, candidates, info)
            demand_buffers(ops, info)
            bad = {
                cid
                for cid, c in candidates.items()
                if cid not in _carried_ids(info)
                or {id(c.arg), id(c.result), id(_yielded(c))} & info.materialized
            }
            if not bad:
                return info
            excluded |= bad

    @staticmethod
    def _carry(
        op: Operation, aff: dict[int, Affine], candidates: dict[int, CarriedPointer], excluded: set[int]
    ) -> None:
        """Tentatively give pointer iter_args the affine form init + carry(arg)."""
        body = op.regions[0].entry
        for i, init in enumerate(op.operands[3:]):
            arg, result = body.args[i + 1], op.results[i]
            a = aff.get(id(init))
            if (
                a is None
                or a.base is None
                or a.rows is not None
                or id(arg) in excluded
                or not arg.type.is_tensor
            ):
                continue
            form = Affine(a.base, s_add(a.offset, ("carry", arg)), a.coefs)
            aff[id(arg)] = form
            aff[id(result)] = form
            candidates[id(arg)] = CarriedPointer(i, arg, result, ZERO)

    @staticmethod
    def _validate_carried(
        ops: list[Operation], aff: dict[int, Affine], candidates: dict[int, CarriedPointer], info: PointerInfo
    ) -> None:
        """Keep the candidates whose yielded value is the argument plus a uniform step."""
        for c in candidates.values():
            y = _yielded(c)
            a, ay = aff[id(c.arg)], aff.get(id(y))
            if ay is None or ay.base is not a.base or ay.coefs != a.coefs:
                continue
            delta = s_sub(ay.offset, a.offset)
            if "carry" in repr(delta):
                continue
            c.delta = delta
            region = c.arg.block.parent
            assert region is not None
            loop = region.parent
            info.carried.setdefault(id(loop), {})[c.index] = c

    # -- affine forms -----------------------------------------------------------------------
    def _visit(self, op: Operation, aff: dict[int, Affine], masks: dict[int, MaskInfo]) -> None:
        name = op.name
        if not op.results or not op.results[0].type.is_tensor:
            return
        res = op.results[0]
        rank = len(res.shape)
        zeros = tuple(ZERO for _ in range(rank))

        def get(v: Value) -> Affine | None:
            return aff.get(id(v))

        def get_rows(v: Value) -> Affine | None:
            """The affine form of `v`, or `v` itself as a row term (an integer tensor, last dim 1)."""
            a = aff.get(id(v))
            if a is None and _row_shaped(v) and v.type.is_int and v.type.element_type.bitwidth > 1:
                return Affine(None, ZERO, tuple(ZERO for _ in v.shape), v)
            return a

        if name == "tt.make_range":
            aff[id(res)] = Affine(None, ("c", int(op.attr("start", 0))), (ONE,))
        elif name == "tt.splat":
            src = op.operands[0]
            if src.type.is_pointer:
                aff[id(res)] = Affine(src, ZERO, zeros)
            elif src.type.is_int and src.type.element_type.bitwidth == 1:
                masks[id(res)] = MaskInfo(tuple(() for _ in range(rank)), (("v", src),))
            elif src.type.is_int:
                aff[id(res)] = Affine(None, ("v", src), zeros)
        elif name == "arith.constant":
            c = _splat_const(op)
            if isinstance(c, bool):
                masks[id(res)] = MaskInfo(tuple(() for _ in range(rank)), () if c else (("lt0", ONE),))
            elif isinstance(c, int) and res.type.is_int:
                aff[id(res)] = Affine(None, ("c", c), zeros)
        elif name in ("arith.addi", "arith.subi", "tt.addptr"):
            rows_ok = self.row_gather and name != "arith.subi"
            a = get_rows(op.operands[0]) if rows_ok and name != "tt.addptr" else get(op.operands[0])
            b = get_rows(op.operands[1]) if rows_ok else get(op.operands[1])
            if a is None or b is None or b.base is not None or (name != "tt.addptr" and a.base is not None):
                return
            if a.rows is not None and b.rows is not None:
                return
            comb = s_add if name != "arith.subi" else s_sub
            aff[id(res)] = Affine(
                a.base,
                comb(a.offset, b.offset),
                tuple(comb(x, y) for x, y in zip(a.coefs, b.coefs, strict=True)),
                a.rows if a.rows is not None else b.rows,
            )
        elif name == "arith.muli":
            a, b = get(op.operands[0]), get(op.operands[1])
            if a is None or b is None or a.base is not None or b.base is not None:
                return
            if a.rows is not None or b.rows is not None:
                return
            if b.uniform:
                a, b = b, a
            if not a.uniform:
                return
            k = a.offset
            aff[id(res)] = Affine(None, s_mul(k, b.offset), tuple(s_mul(k, c) for c in b.coefs))
        elif name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast"):
            a = get(op.operands[0])
            if a is not None and (a.rows is None or name == "arith.extsi"):
                aff[id(res)] = a
        elif name == "tt.expand_dims":
            axis = int(op.attr("axis"))
            a = get(op.operands[0])
            if a is not None and a.rows is None:
                coefs = list(a.coefs)
                coefs.insert(axis, ZERO)
                aff[id(res)] = Affine(a.base, a.offset, tuple(coefs))
            m = masks.get(id(op.operands[0]))
            if m is not None and m.rows is None:
                bounds = list(m.bounds)
                bounds.insert(axis, ())
                masks[id(res)] = MaskInfo(tuple(bounds), m.conds)
        elif name == "tt.broadcast":
            src = op.operands[0]
            src_shape = src.shape
            a = get_rows(src) if self.row_gather else get(src)
            if a is not None and len(src_shape) == rank:
                bcoefs = tuple(ZERO if s == 1 else c for s, c in zip(src_shape, a.coefs, strict=True))
                aff[id(res)] = Affine(a.base, a.offset, bcoefs, a.rows)
            m = masks.get(id(src))
            if m is None and self.row_gather and _row_shaped(src) and _is_i1(src):
                m = MaskInfo(tuple(() for _ in range(rank)), (), src)
            if m is not None and len(src_shape) == rank:
                masks[id(res)] = m
        elif name == "arith.cmpi":
            self._cmp(op, aff, masks)
        elif name == "arith.andi":
            m1, m2 = masks.get(id(op.operands[0])), masks.get(id(op.operands[1]))
            if m1 is not None and m2 is not None and (m1.rows is None or m2.rows is None):
                masks[id(res)] = MaskInfo(
                    tuple(x + y for x, y in zip(m1.bounds, m2.bounds, strict=True)),
                    m1.conds + m2.conds,
                    m1.rows if m1.rows is not None else m2.rows,
                )
        if id(res) in aff:  # index k of a size-1 dim is always 0
            a = aff[id(res)]
            aff[id(res)] = Affine(
                a.base,
                a.offset,
                tuple(ZERO if d == 1 else c for d, c in zip(res.shape, a.coefs, strict=True)),
                a.rows,
            )

    def _cmp(self, op: Operation, aff: dict[int, Affine], masks: dict[int, MaskInfo]) -> None:
        pred = str(op.attr("predicate"))
        a, b = aff.get(id(op.operands[0])), aff.get(id(op.operands[1]))
        if a is None or b is None or a.base is not None or b.base is not None:
            return
        if a.rows is not None or b.rows is not None:
            return
        # normalise to d < 0
        if pred == "slt":
            d_off, d_coefs = (
                s_sub(a.offset, b.offset),
                [s_sub(x, y) for x, y in zip(a.coefs, b.coefs, strict=True)],
            )
        elif pred == "sgt":
            d_off, d_coefs = (
                s_sub(b.offset, a.offset),
                [s_sub(y, x) for x, y in zip(a.coefs, b.coefs, strict=True)],
            )
        elif pred == "sle":
            d_off = s_sub(s_sub(a.offset, b.offset), ONE)
            d_coefs = [s_sub(x, y) for x, y in zip(a.coefs, b.coefs, strict=True)]
        elif pred == "sge":
            d_off = s_sub(s_sub(b.offset, a.offset), ONE)
            d_coefs = [s_sub(y, x) for x, y in zip(a.coefs, b.coefs, strict=True)]
        else:
            return
        rank = len(d_coefs)
        nonzero = [k for k, c in enumerate(d_coefs) if c != ZERO]
        if not nonzero:
            masks[id(op.results[0])] = MaskInfo(tuple(() for _ in range(rank)), (("lt0", d_off),))
        elif len(nonzero) == 1 and d_coefs[nonzero[0]] == ONE:
            bounds: list[tuple[SExpr, ...]] = [() for _ in range(rank)]
            bounds[nonzero[0]] = (s_neg(d_off),)
            masks[id(op.results[0])] = MaskInfo(tuple(bounds))

    def _accumulable(self, op: Operation) -> bool:
        return (
            self.accumulate
            and op.name == "tt.atomic_rmw"
            and op.operands[0].type.is_tensor
            and accumulate_form(op) is not None
        )

    def _access(
        self, op: Operation, aff: dict[int, Affine], masks: dict[int, MaskInfo]
    ) -> BlockAccess | RowAccess | None:
        ptr = aff.get(id(op.operands[0]))
        if ptr is None or ptr.base is None:
            return None
        mask: MaskInfo | None = None
        mask_tensor = False
        mask_index = 1 if op.name == "tt.load" else 2
        if len(op.operands) > mask_index:
            mask = masks.get(id(op.operands[mask_index]))
            if mask is None or (mask.rows is not None and ptr.rows is None):
                mask, mask_tensor = None, True
        if ptr.rows is not None:
            return self._row_access(op, ptr, mask, mask_tensor)
        if op.name == "tt.load" and len(op.operands) > 2:
            other = op.operands[2]
            src = other.owner
            if not isinstance(src, Operation) or src.name not in ("tt.splat", "arith.constant"):
                return None
            if src.name == "arith.constant" and _splat_const(src) is None:
                return None
        return BlockAccess(op, ptr.base, ptr.offset, ptr.coefs, mask, mask_tensor)

    @staticmethod
    def _row_access(op: Operation, ptr: Affine, mask: MaskInfo | None, mask_tensor: bool) -> RowAccess | None:
        """A row gather when the columns are unit-stride, the outer dims carry only the row term
        and `other` is uniform (else None: the per-element gather)."""
        shape = op.operands[0].shape
        if op.name != "tt.load" or len(shape) < 2 or shape[-1] < 2 or ptr.coefs[-1] != ONE:
            return None
        if any(c != ZERO for c in ptr.coefs[:-1]) or ptr.base is None or ptr.rows is None:
            return None
        if len(op.operands) > 2:
            src = op.operands[2].owner
            if not isinstance(src, Operation) or src.name not in ("tt.splat", "arith.constant"):
                return None
            if src.name == "arith.constant" and _splat_const(src) is None:
                return None
        return RowAccess(op, ptr.base, ptr.offset, ptr.rows, mask, mask_tensor)


def _row_shaped(v: Value) -> bool:
    """A tensor of rank >= 2 whose last dim is 1 (a per-row value)."""
    return v.type.is_tensor and len(v.shape) >= 2 and v.shape[-1] == 1


def _is_i1(v: Value) -> bool:
    return v.type.is_int and v.type.element_type.bitwidth == 1


def _yielded(c: CarriedPointer) -> Value:
    term = c.arg.block.terminator
    assert term is not None
    return term.operands[c.index]


def _carried_ids(info: PointerInfo) -> set[int]:
    return {id(c.arg) for cs in info.carried.values() for c in cs.values()}
