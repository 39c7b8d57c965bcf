"""The op table of the tile IR: `OP_SPECS`, filled by one `_op(...)` declaration per op (operands,
results, attributes, syntax, type rule). Readers use `lowering.ir.registry`."""

from __future__ import annotations

from lowering.ir.op_spec import AttrSpec, OperandSpec, OpSpec

OP_SPECS: dict[str, OpSpec] = {}


def _op(
    name: str,
    syntax: str,
    operands: str = "",
    num_results: int | None = 1,
    *,
    attrs: dict[str, AttrSpec] | None = None,
    num_regions: int = 0,
    terminator: bool = False,
    rule: str | None = None,
    summary: str = "",
) -> None:
    """Register an op. `operands` is a space-separated list of ``name``, ``name?`` or ``name*``."""
    specs = []
    for word in operands.split():
        kind = word[-1] if word[-1] in "?*" else "1"
        specs.append(OperandSpec(word.rstrip("?*"), kind))
    OP_SPECS[name] = OpSpec(
        name, syntax, tuple(specs), num_results, dict(attrs or {}), num_regions, terminator, rule, summary
    )


def _enum(which: str, required: bool = True, default: str | None = None) -> AttrSpec:
    return AttrSpec("enum", required, which, default)


_INT = AttrSpec("int", True)
_BOOL = AttrSpec("bool")


# ------------------------------------------------------------------------------ arith
_op(
    "arith.constant",
    "constant",
    "",
    attrs={"value": AttrSpec("any", True)},
    rule="constant",
    summary="a scalar or dense tensor constant",
)
for _n in (
    "addi",
    "subi",
    "muli",
    "divsi",
    "divui",
    "remsi",
    "remui",
    "andi",
    "ori",
    "xori",
    "shli",
    "shrsi",
    "shrui",
    "maxsi",
    "minsi",
    "maxui",
    "minui",
    "ceildivsi",
    "ceildivui",
    "floordivsi",
):
    _op(f"arith.{_n}", "same_type", "lhs rhs", rule="same_type_int", summary="integer binary op")
for _n in ("addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxnumf", "minnumf"):
    _op(f"arith.{_n}", "same_type", "lhs rhs", rule="same_type_float", summary="float binary op")
_op("arith.negf", "same_type", "operand", rule="same_type_float")
_op("arith.cmpi", "cmp", "lhs rhs", attrs={"predicate": _enum("cmpi")}, rule="cmp")
_op("arith.cmpf", "cmp", "lhs rhs", attrs={"predicate": _enum("cmpf")}, rule="cmp")
_op("arith.select", "select", "condition true_value false_value", rule="select")
for _n in (
    "extsi",
    "extui",
    "trunci",
    "extf",
    "truncf",
    "sitofp",
    "uitofp",
    "fptosi",
    "fptoui",
    "bitcast",
    "index_cast",
    "index_castui",
):
    _op(f"arith.{_n}", "cast_to", "in", rule="cast_same_shape", summary="element type conversion")

# ------------------------------------------------------------------------------ math
for _n in (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "cbrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "absf",
    "floor",
    "ceil",
    "round",
    "roundeven",
    "trunc",
):
    _op(f"math.{_n}", "same_type", "operand", rule="same_type_float", summary="float unary math")
for _n in ("absi", "ctlz", "cttz", "ctpop"):
    _op(f"math.{_n}", "same_type", "operand", rule="same_type_int")
for _n in ("powf", "atan2", "copysign"):
    _op(f"math.{_n}", "same_type", "lhs rhs", rule="same_type_float")
_op("math.ipowi", "same_type", "lhs rhs", rule="same_type_int")
_op("math.fma", "same_type", "a b c", rule="same_type_float")
_op("math.fpowi", "math_fpowi", "lhs rhs", rule="same_shape")
for _n in ("isnan", "isinf", "isfinite"):
    _op(f"math.{_n}", "math_predicate", "operand", rule="same_shape")

# ------------------------------------------------------------------------------ tt: program and ranges
_op("tt.get_program_id", "program_dim", "", attrs={"axis": _INT}, rule="scalar_i32")
_op("tt.get_num_programs", "program_dim", "", attrs={"axis": _INT}, rule="scalar_i32")
_op("tt.make_range", "result_type_only", "", attrs={"start": _INT, "end": _INT}, rule="make_range")

# ------------------------------------------------------------------------------ tt: shape ops
_op("tt.splat", "arrow_cast", "src", rule="splat")
_op("tt.unsplat", "arrow_cast", "src", rule="unsplat")
_op("tt.broadcast", "arrow_cast", "src", rule="broadcast")
_op("tt.expand_dims", "arrow_cast", "src", attrs={"axis": _INT}, rule="expand_dims")
_op(
    "tt.reshape",
    "arrow_cast",
    "src",
    attrs={"allow_reorder": AttrSpec("unit"), "efficient_layout": AttrSpec("unit")},
    rule="reshape",
)
_op("tt.trans", "arrow_cast", "src", attrs={"order": AttrSpec("array", True)}, rule="trans")
_op("tt.join", "arrow_cast", "lhs rhs", rule="join")
_op("tt.split", "arrow_cast", "src", 2, rule="split")
_op("tt.cat", "arrow_cast", "lhs rhs", rule="cat")
_op("tt.histogram", "arrow_cast", "src mask?", rule="histogram")
_op(
    "tt.gather",
    "functional",
    "src indices",
    attrs={"axis": _INT, "efficient_layout": AttrSpec("unit")},
    rule="gather",
)

# ------------------------------------------------------------------------------ tt: pointers, memory
_op("tt.addptr", "addptr", "ptr offset", rule="addptr")
_op("tt.int_to_ptr", "arrow_cast", "src", rule="cast_same_shape")
_op("tt.ptr_to_int", "arrow_cast", "src", rule="cast_same_shape")
_op("tt.bitcast", "arrow_cast", "src", rule="cast_same_shape")
_op("tt.fp_to_fp", "arrow_cast", "src", attrs={"rounding": _enum("rounding", False)}, rule="cast_same_shape")
_op(
    "tt.load",
    "load",
    "ptr mask? other?",
    attrs={
        "cache": _enum("cache", False, "none"),
        "evict": _enum("evict", False, "evict_normal"),
        "isVolatile": AttrSpec("bool", False, None, False),
        "boundaryCheck": AttrSpec("array"),
        "padding": _enum("padding", False),
    },
    rule="load",
)
_op(
    "tt.store",
    "store",
    "ptr value mask?",
    0,
    attrs={
        "cache": _enum("cache", False, "none"),
        "evict": _enum("evict", False, "evict_normal"),
        "boundaryCheck": AttrSpec("array"),
    },
    rule="store",
)
_op(
    "tt.atomic_rmw",
    "atomic",
    "ptr val mask?",
    attrs={"atomic_rmw_op": _enum("rmw"), "sem": _enum("sem"), "scope": _enum("scope")},
    rule="atomic",
)
_op(
    "tt.atomic_cas",
    "atomic",
    "ptr cmp val",
    attrs={"sem": _enum("sem"), "scope": _enum("scope")},
    rule="atomic",
)
_op(
    "tt.make_tensor_ptr",
    "make_tensor_ptr",
    "base shape* strides* offsets*",
    attrs={"order": AttrSpec("array", True)},
    rule="make_tensor_ptr",
)
_op("tt.advance", "advance", "ptr offsets*", rule="same_result_as_first")
_op(
    "tt.make_tensor_descriptor",
    "make_tensor_descriptor",
    "base shape* strides*",
    attrs={"padding": _enum("padding", False)},
    rule="make_tensor_descriptor",
)
_op(
    "tt.descriptor_load",
    "descriptor_load",
    "desc indices*",
    attrs={"cache": _enum("cache", False, "none"), "evict": _enum("evict", False, "evict_normal")},
    rule="descriptor_access",
)
_op("tt.descriptor_store", "descriptor_store", "desc src indices*", 0, rule="descriptor_access")
_op("tt.descriptor_gather", "functional", "desc x_offsets y_offset")
_op("tt.descriptor_scatter", "descriptor_scatter", "desc x_offsets y_offset src", 0)
_op(
    "tt.descriptor_reduce",
    "descriptor_reduce",
    "desc src indices*",
    0,
    attrs={"kind": _enum("reduce_kind")},
    rule="descriptor_access",
)

# ------------------------------------------------------------------------------ tt: compute
_op(
    "tt.dot",
    "dot",
    "a b c",
    attrs={
        "inputPrecision": _enum("precision", False, "ieee"),
        "maxNumImpreciseAcc": AttrSpec("int", False, None, 0),
    },
    rule="dot",
)
_op(
    "tt.dot_scaled",
    "dot_scaled",
    "a b c a_scale? b_scale?",
    attrs={
        "a_elem_type": _enum("scale_elem"),
        "b_elem_type": _enum("scale_elem"),
        "fastMath": _BOOL,
        "lhs_k_pack": _BOOL,
        "rhs_k_pack": _BOOL,
    },
    rule="dot_scaled",
)
_op("tt.reduce", "generic", "srcs*", None, attrs={"axis": _INT}, num_regions=1, rule="reduce")
_op("tt.reduce.return", "return_like", "result*", 0, terminator=True)
_op("tt.scan", "generic", "srcs*", None, attrs={"axis": _INT, "reverse": _BOOL}, num_regions=1, rule="scan")
_op("tt.scan.return", "return_like", "result*", 0, terminator=True)
_op("tt.map_elementwise", "generic", "srcs*", None, attrs={"pack": _INT}, num_regions=1)
_op("tt.map_elementwise.return", "return_like", "result*", 0, terminator=True)
_op(
    "tt.clampf", "clampf", "x min max", attrs={"propagateNan": _enum("propagate_nan")}, rule="same_type_float"
)
_op("tt.precise_sqrt", "same_type", "x", rule="same_type_float")
_op("tt.precise_divf", "same_type", "x y", rule="same_type_float")
_op("tt.mulhiui", "same_type", "x y", rule="same_type_int")
_op(
    "tt.extern_elementwise",
    "functional",
    "srcs*",
    attrs={
        "libname": AttrSpec("str", True),
        "libpath": AttrSpec("str", True),
        "symbol": AttrSpec("str", True),
        "pure": AttrSpec("bool", True),
    },
    rule="same_shape",
)
_op(
    "tt.elementwise_inline_asm",
    "inline_asm",
    "args*",
    None,
    attrs={
        "asm_string": AttrSpec("str", True),
        "constraints": AttrSpec("str", True),
        "pure": _BOOL,
        "packed_element": _INT,
    },
)

# ------------------------------------------------------------------------------ tt: calls, debug
_op("tt.call", "call", "operands*", None, attrs={"callee": AttrSpec("symbol", True)})
_op("tt.return", "return_like", "srcs*", 0, terminator=True)
_op(
    "tt.print",
    "print",
    "args*",
    0,
    attrs={"prefix": AttrSpec("str", True), "hex": _BOOL, "isSigned": AttrSpec("array")},
)
_op("tt.assert", "assert", "condition", 0, attrs={"message": AttrSpec("str", True)})

_op("gpu.barrier", "bare", "", 0, summary="tl.debug_barrier(): a barrier among the program's threads")

# ------------------------------------------------------------------------------ scf, cf
_op("scf.for", "scf_for", "lowerBound upperBound step initArgs*", None, num_regions=1, rule="scf_for")
_op("scf.while", "scf_while", "inits*", None, num_regions=2, rule="scf_while")
_op("scf.if", "scf_if", "condition", None, num_regions=2, rule="scf_if")
_op("scf.yield", "return_like", "results*", 0, terminator=True)
_op("scf.condition", "scf_condition", "condition args*", 0, terminator=True)
_op("cf.br", "cf_br", "destOperands*", 0, terminator=True)
_op("cf.cond_br", "cf_cond_br", "condition trueDestOperands* falseDestOperands*", 0, terminator=True)
_op("ub.poison", "result_type_only", "", rule=None)
