"""The op registry: for every op the tile IR knows, its operands, results, attributes and syntax.

`OP_SPECS` maps an op name to its `OpSpec`. The parser reads an op's custom (pretty) form with the
handler named by ``spec.syntax`` (``lowering/ttir/custom_forms.py``), the printer writes it back
with the printer of the same name (``lowering/ir/printer.py``), and the verifier checks arity,
attributes and the op's type rule (``lowering/ir/verifier.py``). Enum attributes are stored as
their keyword (``"slt"``, ``"evict_last"``, ``"fadd"``); `ENUMS` gives their integer codes for the
generic form. A new op is a new entry here (and a type rule if it needs one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lowering.ir.core import Operation, Value

__all__ = [
    "OperandSpec",
    "AttrSpec",
    "OpSpec",
    "OP_SPECS",
    "ENUMS",
    "get_spec",
    "is_registered",
    "supported_ops",
    "named_operands",
    "registrar",
]


@dataclass(frozen=True)
class OperandSpec:
    """An operand group: `kind` is ``"1"`` (exactly one), ``"?"`` (optional) or ``"*"`` (variadic)."""

    name: str
    kind: str = "1"


@dataclass(frozen=True)
class AttrSpec:
    """An inherent attribute: `kind` is int/bool/str/enum/array/dense/float/any/type/symbol."""

    kind: str
    required: bool = False
    enum: str | None = None  # key into ENUMS for kind == "enum"
    default: Any = None  # filled in by the parser when absent (None: no default)


@dataclass(frozen=True)
class OpSpec:
    """What the IR knows about one op."""

    name: str
    syntax: str
    operands: tuple[OperandSpec, ...] = ()
    num_results: int | None = 1  # None: variadic
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    num_regions: int = 0
    terminator: bool = False
    rule: str | None = None  # type rule name in the verifier
    summary: str = ""

    @property
    def min_operands(self) -> int:
        return sum(1 for o in self.operands if o.kind == "1")

    @property
    def max_operands(self) -> int | None:
        if any(o.kind == "*" for o in self.operands):
            return None
        return len(self.operands)


#: Enum keyword ↔ integer code (the generic form prints the integer).
ENUMS: dict[str, dict[str, int]] = {
    "cmpi": {
        "eq": 0,
        "ne": 1,
        "slt": 2,
        "sle": 3,
        "sgt": 4,
        "sge": 5,
        "ult": 6,
        "ule": 7,
        "ugt": 8,
        "uge": 9,
    },
    "cmpf": {
        "false": 0,
        "oeq": 1,
        "ogt": 2,
        "oge": 3,
        "olt": 4,
        "ole": 5,
        "one": 6,
        "ord": 7,
        "ueq": 8,
        "ugt": 9,
        "uge": 10,
        "ult": 11,
        "ule": 12,
        "une": 13,
        "uno": 14,
        "true": 15,
    },
    "cache": {"none": 1, "ca": 2, "cg": 3, "wb": 4, "cs": 5, "wt": 6, "cv": 7},
    "evict": {"evict_normal": 1, "evict_first": 2, "evict_last": 3},
    "rmw": {
        "and": 1,
        "or": 2,
        "xor": 3,
        "add": 4,
        "fadd": 5,
        "max": 6,
        "min": 7,
        "umax": 8,
        "umin": 9,
        "exch": 10,
    },
    "sem": {"relaxed": 1, "acquire": 2, "release": 3, "acq_rel": 4},
    "scope": {"gpu": 1, "cta": 2, "sys": 3},
    "precision": {"tf32": 0, "tf32x3": 1, "ieee": 2, "bf16x3": 3, "bf16x6": 4},
    "rounding": {"rtz": 0, "rtne": 1},
    "padding": {"zero": 1, "nan": 2},
    "propagate_nan": {"none": 0, "all": 65535},
    "scale_elem": {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4, "bf16": 5, "fp16": 6},
    "program_dim": {"x": 0, "y": 1, "z": 2},
    "reduce_kind": {"add": 1, "min": 2, "max": 3, "inc": 4, "dec": 5, "and": 6, "or": 7, "xor": 8},
}

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


Handler = TypeVar("Handler", bound=Callable[..., Any])


def registrar(table: dict[str, Handler]) -> Callable[[str], Callable[[Handler], Handler]]:
    """The decorator that files a handler under the name an `OpSpec` gives it (its `syntax` or
    `rule`): ``@reg("cmp")`` on a function puts it in `table` under ``"cmp"``."""

    def register(name: str) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            table[name] = fn
            return fn

        return deco

    return register


def get_spec(name: str) -> OpSpec:
    """The spec of op `name` (KeyError when the IR does not know it)."""
    return OP_SPECS[name]


def is_registered(name: str) -> bool:
    return name in OP_SPECS


def supported_ops() -> list[str]:
    """All op names the tile IR supports, sorted."""
    return sorted(OP_SPECS)


def named_operands(op: Operation) -> dict[str, Value | list[Value] | None]:
    """The op's operands by the names of its spec (``{"ptr": v, "mask": v | None, ...}``).

    Optional groups are filled left to right; a variadic group takes what is left, or, when an op
    has several variadic groups (``tt.make_tensor_ptr``: shape/strides/offsets), an equal share.
    ``cf.cond_br`` uses its ``operandSegmentSizes`` attribute.
    """
    spec = OP_SPECS[op.name]
    ops = list(op.operands)
    segs = op.attributes.get("operandSegmentSizes")
    if segs is not None and len(segs) == len(spec.operands):
        out: dict[str, Value | list[Value] | None] = {}
        pos = 0
        for s, n in zip(spec.operands, segs, strict=True):
            group = ops[pos : pos + int(n)]
            pos += int(n)
            out[s.name] = group if s.kind == "*" else (group[0] if group else None)
        return out
    fixed = [s for s in spec.operands if s.kind == "1"]
    optional = [s for s in spec.operands if s.kind == "?"]
    variadic = [s for s in spec.operands if s.kind == "*"]
    spare = len(ops) - len(fixed)
    n_opt = min(len(optional), spare) if not variadic else 0
    per_var = (spare - n_opt) // len(variadic) if variadic else 0
    out = {}
    pos = 0
    opt_left = n_opt
    for s in spec.operands:
        if s.kind == "1":
            out[s.name] = ops[pos] if pos < len(ops) else None
            pos += 1
        elif s.kind == "?":
            if opt_left > 0:
                out[s.name] = ops[pos]
                pos += 1
                opt_left -= 1
            else:
                out[s.name] = None
        else:
            out[s.name] = ops[pos : pos + per_var]
            pos += per_var
    return out
