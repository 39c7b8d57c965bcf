"""Which tensor values need a local-store buffer, once pointer analysis has found its block accesses,
row gathers and loop-carried pointers (`PointerInfo.materialized`)."""

from __future__ import annotations

from lowering.ir.core import Operation
from lowering.passes.pointer_forms import PointerInfo

_SIDE_EFFECT_PREFIXES = (
    "scf.",
    "tt.store",
    "tt.atomic",
    "tt.print",
    "tt.assert",
    "tt.return",
    "cf.",
    "tt.descriptor_store",
)


def demand_buffers(ops: list[Operation], info: PointerInfo) -> None:
    """Add to `info.materialized` every tensor read from the local store: the operands of ops with
    side effects or needed (or scalar) results, what block accesses and row gathers read (stored
    values, `other`, tensor masks, row tensors) and block arguments in use; carried pointers stay
    symbolic. Two backward sweeps, as loops feed values back through their iter_args."""
    need = info.materialized
    skip: set[tuple[int, int]] = set()  # (id(op), operand index) of carried pointers
    carried_args: set[int] = set()
    for loop_id, cs in info.carried.items():
        for c in cs.values():
            skip.add((loop_id, 3 + c.index))
            y_op = c.arg.block.terminator
            assert y_op is not None
            skip.add((id(y_op), c.index))
            carried_args.add(id(c.arg))
    for _ in range(2):  # loops feed values backwards through iter_args; two sweeps settle
        for op in reversed(ops):
            acc = info.accesses.get(id(op))
            row = info.rows.get(id(op))
            if row is not None:
                operands = list(op.operands[2:3])
                if row.mask_tensor:
                    operands.append(op.operands[1])
                need.update(id(v) for v in row.values())
            elif acc is not None:
                operands = [op.operands[1]] if op.name != "tt.load" else list(op.operands[2:3])
                if acc.mask_tensor:
                    operands.append(op.operands[2 if op.name == "tt.store" else 1])
            elif op.name.startswith(_SIDE_EFFECT_PREFIXES) or any(
                id(r) in need or not r.type.is_tensor for r in op.results
            ):
                operands = list(op.operands)
            else:
                operands = []
            for k, v in enumerate(operands):
                if v.type.is_tensor and (id(op), k) not in skip:
                    need.add(id(v))
        for op in ops:  # block arguments of regions whose owner needs them
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        if arg.type.is_tensor and arg.uses and id(arg) not in carried_args:
                            need.add(id(arg))
