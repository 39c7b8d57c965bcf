"""The tile-IR API the lowering passes build on: types, attributes, locations, walking, def-use edits."""

import math

import numpy as np
import pytest

from lowering.ir import (
    UNIT,
    Block,
    DenseArray,
    DenseAttr,
    FloatAttr,
    FloatType,
    IntAttr,
    IntType,
    Operation,
    PointerType,
    Region,
    TensorDescType,
    TensorType,
    bf16,
    f16,
    f32,
    i1,
    i32,
    i64,
    named_operands,
    print_module,
    supported_ops,
    verify,
)
from lowering.ir.printer import format_float
from lowering.ttir import parse_ttir
from lowering.ttir.raw import decode_string

PTR_TENSOR = TensorType((64,), PointerType(f32))


def test_types_answer_shape_element_and_pointer_questions() -> None:
    t = TensorType((4, 8), f16)
    assert (t.shape, t.rank, t.numel, t.element_type, t.bitwidth) == ((4, 8), 2, 32, f16, 16)
    assert t.is_tensor and t.is_float and not t.is_pointer and str(t) == "tensor<4x8xf16>"
    assert i32.shape == () and i32.element_type is i32 and i32.numel == 1 and i32.is_int
    assert PTR_TENSOR.is_pointer and str(PTR_TENSOR) == "tensor<64x!tt.ptr<f32>>"
    block_ptr = PointerType(TensorType((16, 32), bf16))
    assert block_ptr.is_block_pointer and str(block_ptr) == "!tt.ptr<tensor<16x32xbf16>>"
    assert str(TensorDescType(TensorType((16, 16), f16))) == "!tt.tensordesc<tensor<16x16xf16>>"
    assert str(TensorType((2,), FloatType("f8E4M3FN"))) == "tensor<2xf8E4M3FN>"
    assert TensorType((4,), f32) == TensorType((4,), FloatType("f32")) and hash(IntType(32)) == hash(i32)
    with pytest.raises(ValueError, match="unknown float type"):
        FloatType("f12")


TEXT = """
#loc = loc("k.py":1:0)
#loc1 = loc("lib.py":50:7)
#loc2 = loc("k.py":9:12)
#loc3 = loc("acc"(#loc2))
#loc4 = loc(callsite(#loc1 at #loc3))
module {
  tt.func public @k(%x: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x"(#loc)), %n: i32 loc("n"(#loc))) {
    %r = tt.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32> loc(#loc2)
    %cst = arith.constant dense<[1.5, -2.0, 0x7F800000, 4.0]> : tensor<4xf32> loc(#loc4)
    %b = arith.constant dense<[1, 2]> : tensor<2xbf16> loc(fused[#loc1, #loc2])
    %c = arith.constant 0xFF800000 : f32
    %p = tt.splat %x : !tt.ptr<f32> -> tensor<4x!tt.ptr<f32>>
    %q = tt.addptr %p, %r : tensor<4x!tt.ptr<f32>>, tensor<4xi32>
    %m = arith.cmpi slt, %r, %r : tensor<4xi32>
    %v = tt.load %q, %m, %cst : tensor<4x!tt.ptr<f32>>
    %s = scf.for %i = %n to %n step %n iter_args(%acc = %v) -> (tensor<4xf32>) : i32 {
      %w = arith.addf %acc, %cst : tensor<4xf32>
      scf.yield %w : tensor<4xf32>
    } loc(#loc3)
    tt.store %q, %s, %m : tensor<4x!tt.ptr<f32>>
    tt.return
  } loc(#loc)
}
"""


def test_module_function_and_argument_attributes() -> None:
    module = parse_ttir(TEXT)
    verify(module)
    k = module.get_function("k")
    assert module.kernels == [k] and k.visibility == "public"
    assert k.arg_types == [PointerType(f32), i32] and [a.name_hint for a in k.args] == ["x", "n"]
    assert k.arg_attr(0, "tt.divisibility") == 16 and k.arg_attr(1, "tt.divisibility") is None
    assert str(k.arg_locations[0]) == "k.py:1:0" and k.arg_locations[0].name == "x"
    with pytest.raises(KeyError, match="no function @nope"):
        module.get_function("nope")


def test_walk_is_program_order_with_nested_ops() -> None:
    names = [op.name for op in parse_ttir(TEXT).walk()]
    assert names == [
        "tt.make_range",
        "arith.constant",
        "arith.constant",
        "arith.constant",
        "tt.splat",
        "tt.addptr",
        "arith.cmpi",
        "tt.load",
        "scf.for",
        "arith.addf",
        "scf.yield",
        "tt.store",
        "tt.return",
    ]


def test_attributes_are_python_values() -> None:
    ops = {op.results[0].name_hint: op for op in parse_ttir(TEXT).walk() if op.results}
    make_range = ops["r"]
    assert make_range.attributes == {"end": 4, "start": 0}
    assert isinstance(make_range.attr("end"), IntAttr) and make_range.attr("end").type == i32
    dense = ops["cst"].attr("value")
    assert isinstance(dense, DenseAttr) and not dense.is_splat and dense.type == TensorType((4,), f32)
    np.testing.assert_array_equal(dense.value, np.array([1.5, -2.0, np.inf, 4.0], dtype=np.float32))
    assert ops["b"].attr("value").value.dtype.name == "bfloat16"
    neg_inf = ops["c"].attr("value")
    assert isinstance(neg_inf, FloatAttr) and neg_inf == -math.inf and neg_inf.type == f32
    assert ops["m"].attr("predicate") == "slt"
    load = ops["v"]
    assert load.attributes == {"cache": "none", "evict": "evict_normal", "isVolatile": False}


def test_named_operands_follow_the_op_spec() -> None:
    ops = {op.results[0].name_hint: op for op in parse_ttir(TEXT).walk() if op.results}
    load = ops["v"]
    groups = named_operands(load)
    assert (
        groups["ptr"] is ops["q"].result
        and groups["mask"] is ops["m"].result
        and groups["other"] is ops["cst"].result
    )
    loop = ops["s"]
    g = named_operands(loop)
    assert len(g["initArgs"]) == 1 and g["initArgs"][0] is load.result
    body = loop.regions[0].entry
    assert [a.name_hint for a in body.args] == ["i", "acc"] and body.args[1].type == TensorType((4,), f32)
    assert body.terminator is not None and body.terminator.name == "scf.yield"


def test_locations_resolve_aliases_names_and_call_sites() -> None:
    ops = {op.results[0].name_hint: op for op in parse_ttir(TEXT).walk() if op.results}
    assert (ops["r"].location.file, ops["r"].location.line, ops["r"].location.col) == ("k.py", 9, 12)
    inlined = ops["cst"].location
    assert (inlined.file, inlined.line) == ("lib.py", 50) and inlined.caller is not None
    assert inlined.outermost().name == "acc" and inlined.source_position() == "k.py:9:12"
    assert ops["b"].location.file == "lib.py"  # fused: first known part
    assert ops["s"].location.name == "acc"
    assert not ops["c"].location.is_known and ops["c"].location.source_position() == "<unknown location>"


def test_uses_replace_and_erase() -> None:
    module = parse_ttir(TEXT)
    ops = {op.results[0].name_hint: op for op in module.walk() if op.results}
    cst = ops["cst"].result
    assert {u.op.name for u in cst.uses} == {"tt.load", "arith.addf"}
    zero = Operation(
        "arith.constant",
        [],
        [cst.type],
        {"value": DenseAttr(np.zeros(4, np.float32), TensorType((4,), f32))},
        result_names=["zero"],
    )
    module.kernels[0].entry.insert_before(ops["cst"], zero)
    cst.replace_all_uses_with(zero.result)
    assert not cst.uses and len(zero.result.uses) == 2
    ops["cst"].erase()
    verify(module)
    assert "%zero = arith.constant dense<0.0> : tensor<4xf32>" in print_module(module)
    with pytest.raises(ValueError, match="still has 2 uses"):
        zero.erase()


def test_building_ir_by_hand_prints_and_reparses() -> None:
    from lowering.ir import Function, Module

    fn = Function(
        "scale", [PointerType(f32), i32], arg_names=["p", "n"], arg_attrs=[{"tt.divisibility": 16}, {}]
    )
    entry = fn.entry
    pid = entry.append(Operation("tt.get_program_id", [], [i32], {"axis": 0}, result_names=["pid"]))
    cond = entry.append(Operation("arith.cmpi", [pid.result, fn.args[1]], [i1], {"predicate": "slt"}))
    then = Region([Block()])
    then.entry.append(
        Operation("tt.store", [fn.args[0], Operation("tt.load", [fn.args[0]], [f32]).result], [])
    )
    entry.append(Operation("scf.if", [cond.result], [], {}, [then, Region()]))
    entry.append(Operation("tt.return"))
    module = Module([fn])
    errors = __import__("lowering.ir", fromlist=["verify_errors"]).verify_errors(module)
    assert any("not defined before this use" in str(e) for e in errors)  # the load was never inserted
    load = then.entry.ops[0].operands[1].owner
    then.entry.insert(0, load)
    then.entry.append(Operation("scf.yield"))
    verify(module)
    text = print_module(module)
    assert "scf.if %0 {" in text and "tt.load %p : !tt.ptr<f32>" in text
    again = parse_ttir(text)
    verify(again)
    assert print_module(again) == text


@pytest.mark.parametrize("t", [f32, f16, bf16, FloatType("f64")])
@pytest.mark.parametrize("x", [0.1, -3.25e-7, 1e30, 65504.0, math.inf, -math.inf, math.nan, -0.0])
def test_float_literals_read_back_exactly(t: FloatType, x: float) -> None:
    text = f"module {{\n  tt.func @f() {{\n    %c = arith.constant {format_float(x, t)} : {t}\n    tt.return\n  }}\n}}\n"
    v = next(parse_ttir(text).walk()).attr("value")
    if math.isnan(x):
        assert math.isnan(v)
    else:
        assert v == x and math.copysign(1, v) == math.copysign(1, x)


def test_string_escapes() -> None:
    assert decode_string(r'"a\"b\\c\0Ad\09"') == 'a"b\\c\nd\t'


def test_dense_array_and_unit_attributes() -> None:
    text = (
        "module {\n  tt.func @f(%x: tensor<4x2xf32>) {\n"
        "    %t = tt.trans %x {order = array<i32: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>\n"
        "    %r = tt.reshape %x allow_reorder : tensor<4x2xf32> -> tensor<8xf32>\n    tt.return\n  }\n}\n"
    )
    ops = list(parse_ttir(text).walk())
    order = ops[0].attr("order")
    assert isinstance(order, DenseArray) and order == [1, 0] and order.element_type == i32
    assert ops[1].attr("allow_reorder") is UNIT


def test_registry_lists_supported_ops() -> None:
    ops = supported_ops()
    assert len(ops) > 100 and "tt.dot" in ops and "scf.while" in ops and ops == sorted(ops)
    assert i64.bitwidth == 64


def test_dense_hex_blobs_and_empty_input() -> None:
    text = (
        "module {\n  tt.func @f() {\n"
        '    %c = arith.constant dense<"0x0000803F00000040"> : tensor<2xf32>\n'
        '    %d = arith.constant dense<"0x0000803F"> : tensor<3xf32>\n'
        "    tt.return\n  }\n}\n"
    )
    c, d, _ = parse_ttir(text).walk()
    np.testing.assert_array_equal(c.attr("value").value, [1.0, 2.0])
    assert d.attr("value").is_splat and d.attr("value").splat_value == 1.0 and d.result.type.shape == (3,)
    assert parse_ttir("").functions == [] and parse_ttir("\n// only a comment\n").functions == []


def test_clone_copies_ops_with_regions_and_maps_values() -> None:
    from lowering.ir import Function, Module
    from lowering.ir.equivalence import module_difference

    module = parse_ttir(TEXT)
    k = module.kernels[0]
    loop = next(op for op in k.walk() if op.name == "scf.for")
    copy = loop.clone()
    k.entry.insert_before(loop, copy)
    verify(module)
    assert copy.regions[0].entry.args[1] is not loop.regions[0].entry.args[1]
    inner_add = copy.regions[0].entry.ops[0]
    assert inner_add.operands[0] is copy.regions[0].entry.args[1]  # mapped to the clone's own iter arg
    assert print_module(module).count("scf.for") == 2

    # copy a whole function body op by op into a new function with the same signature
    original = parse_ttir(TEXT)
    src = original.kernels[0]
    dst = Function(
        src.name,
        src.arg_types,
        arg_names=[a.name_hint for a in src.args],
        arg_attrs=src.arg_attrs,
        arg_locations=src.arg_locations,
        attributes=src.attributes,
        location=src.location,
    )
    vmap = dict(zip(src.args, dst.args, strict=True))
    for op in src.entry.ops:
        dst.entry.append(op.clone(vmap))
    rebuilt = Module([dst])
    verify(rebuilt)
    assert module_difference(original, rebuilt, locations=True) is None
