"""kegen's tile IR: SSA values with types and shapes, ops with regions, functions and modules.

API in brief (stable; new names get added, none renamed)::

    from lowering.ttir import parse_ttir, module_from_jit
    from lowering.ir import verify, print_module

    module = parse_ttir(ttir_text)            # or module_from_jit(fn, {"x": "*fp32", ...}, {"BLOCK": 64})
    verify(module)                            # raises VerifierError (op, kernel file:line, reason)
    kernel = module.kernels[0]                # Function; module.functions, module.get_function(name)
    kernel.name, kernel.args, kernel.arg_types, kernel.result_types
    kernel.arg_attr(0, "tt.divisibility")     # 16 or None; kernel.arg_attrs[i] is the whole dict
    for op in kernel.walk():                  # every op, nested ones too, in program order
        op.name                               # "tt.load", "arith.addf", "scf.for", ...
        op.operands, op.results, op.result    # Values; op.result when there is exactly one
        op.attributes, op.attr("axis", 0)     # Python values: int/float/bool/str/list/dict, DenseAttr, ...
        op.regions[0].entry.args              # a region's entry block arguments (scf.for: iv, iter args)
        op.location                           # Location(file, line, col, name, caller); .source_position()
        named_operands(op)                    # {"ptr": v, "mask": v | None, "other": v | None} by the op spec
    v.type.shape, v.type.element_type, v.type.is_pointer, v.type.rank, v.type.numel, v.type.bitwidth
    v.uses, v.users, v.replace_all_uses_with(w), op.set_operand(i, w), op.erase(), block.insert_before(a, op)
    op.clone(value_map)                       # deep copy (regions too), operands remapped, map extended
    module_difference(a, b, locations=False)  # lowering.ir.equivalence: first structural difference or None
    print_module(module, locations=False)     # readable TTIR-style text; parse_ttir reads it back

Types (`lowering.ir.types`): IntType(width), FloatType(name), IndexType, PointerType(pointee, address_space),
TensorType(dims, element), TensorDescType(block), FunctionType; constants i1 i8 i16 i32 i64 f16 bf16 f32 f64.
Attributes (`lowering.ir.attributes`): IntAttr/FloatAttr (int/float that keep their MLIR type), DenseAttr
(`.value` numpy array, `.is_splat`, `.splat_value`), DenseArray (list), SymbolRef, UNIT, OpaqueAttr.
Enum attributes hold keywords: cmpi "slt", load cache "none"/"ca", evict "evict_normal"/"evict_last",
atomic_rmw_op "fadd", sem "acq_rel", scope "gpu", dot inputPrecision "ieee" (default) / "tf32"; get_program_id
axis is an int (0, 1, 2). Defaults are filled in when the text leaves them out (load/store cache "none", evict
"evict_normal", load isVolatile False, dot inputPrecision "ieee", maxNumImpreciseAcc 0).
``scf.for``/``scf.if`` bodies always end in an ``scf.yield`` (the parser adds the one MLIR leaves out).
Op specs (operand names, attributes, syntax) are in `lowering.ir.registry.OP_SPECS`.
"""

from lowering.ir.attributes import (
    UNIT,
    DenseArray,
    DenseAttr,
    FloatAttr,
    IntAttr,
    OpaqueAttr,
    SymbolRef,
    UnitAttr,
    attr_equal,
    numpy_dtype,
)
from lowering.ir.core import Block, BlockArgument, Operation, OpResult, Region, Use, Value
from lowering.ir.location import UNKNOWN_LOC, Location
from lowering.ir.module import Function, Module
from lowering.ir.printer import format_attr, print_function, print_module, print_op
from lowering.ir.registry import OP_SPECS, OpSpec, get_spec, is_registered, named_operands, supported_ops
from lowering.ir.types import (
    FloatType,
    FunctionType,
    IndexType,
    IntType,
    NoneType,
    OpaqueType,
    PointerType,
    TensorDescType,
    TensorType,
    Type,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
    index,
)
from lowering.ir.verifier import VerifierError, verify, verify_errors

__all__ = [
    "UNIT",
    "DenseArray",
    "DenseAttr",
    "FloatAttr",
    "IntAttr",
    "OpaqueAttr",
    "SymbolRef",
    "UnitAttr",
    "attr_equal",
    "numpy_dtype",
    "Block",
    "BlockArgument",
    "Operation",
    "OpResult",
    "Region",
    "Use",
    "Value",
    "UNKNOWN_LOC",
    "Location",
    "Function",
    "Module",
    "format_attr",
    "print_function",
    "print_module",
    "print_op",
    "OP_SPECS",
    "OpSpec",
    "get_spec",
    "is_registered",
    "named_operands",
    "supported_ops",
    "FloatType",
    "FunctionType",
    "IndexType",
    "IntType",
    "NoneType",
    "OpaqueType",
    "PointerType",
    "TensorDescType",
    "TensorType",
    "Type",
    "bf16",
    "f16",
    "f32",
    "f64",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "index",
    "VerifierError",
    "verify",
    "verify_errors",
]
