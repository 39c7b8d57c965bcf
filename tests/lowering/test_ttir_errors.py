"""Invalid TTIR gives errors a user can act on: syntax errors with line/column and a snippet, unknown
ops with the op name, the kernel's source line and what is supported, verifier errors naming the op."""

import functools

import pytest
import triton
import triton.language as tl

from lowering.corpus import CORPUS
from lowering.ir import Operation, f32, i32, verify
from lowering.ttir import (
    FrontendError,
    TTIRParseError,
    UnsupportedOpError,
    VerifierError,
    parse_ttir,
    ttir_from_jit,
)


@functools.cache
def _softmax_ttir() -> str:
    return CORPUS["fused_softmax"].ttir()


def test_unknown_op_names_op_kernel_line_and_supported_ops() -> None:
    text = _softmax_ttir().replace("math.exp ", "math.fancy_exp ", 1)
    with pytest.raises(UnsupportedOpError) as info:
        parse_ttir(text)
    err = info.value
    assert err.op_name == "math.fancy_exp"
    # the location is the kernel line with `tl.exp(x)` (norms.py), not the TTIR line
    src = CORPUS["fused_softmax"].fn.fn
    lines, start = __import__("inspect").getsourcelines(src)
    exp_line = start + next(i for i, ln in enumerate(lines) if "tl.exp(" in ln)
    assert err.location is not None and err.location.outermost().line == exp_line
    assert err.location.outermost().file.endswith("norms.py")
    assert f"norms.py:{exp_line}" in str(err)
    assert "math.exp" in err.supported and "math.exp" in str(err)
    assert err.ttir_line == next(i + 1 for i, ln in enumerate(text.splitlines()) if "math.fancy_exp" in ln)
    assert "Traceback" not in str(err) and "lark" not in str(err).lower()


def test_unknown_op_inlined_from_triton_stdlib_reports_the_kernel_line() -> None:
    text = _softmax_ttir().replace('"tt.reduce"', '"tt.reduce_v2"', 1)
    with pytest.raises(UnsupportedOpError) as info:
        parse_ttir(text)
    loc = info.value.location
    assert loc is not None and loc.caller is not None  # inlined from triton/language/standard.py
    assert loc.outermost().file.endswith("norms.py")
    assert "standard.py" not in str(info.value)


def test_syntax_error_has_line_column_snippet_and_expected_tokens() -> None:
    text = "module {\n  tt.func @f() {\n    %a = arith.constant 1 : tensor<4xi32 loc(#l)\n  }\n}\n"
    with pytest.raises(TTIRParseError) as info:
        parse_ttir(text)
    err = info.value
    assert (err.line, err.col) == (3, 42)
    assert "'>'" in err.expected
    msg = str(err)
    assert "TTIR line 3, column 42" in msg and "tensor<4xi32 loc(#l)" in msg and "^" in msg


def test_bad_character() -> None:
    with pytest.raises(TTIRParseError, match=r"line 3, column 33: unexpected character '\$'"):
        parse_ttir("module {\n  tt.func @f() {\n    %a = arith.constant 1 : i32 $\n  }\n}\n")


def test_undefined_value() -> None:
    with pytest.raises(TTIRParseError, match="use of undefined value %b") as info:
        parse_ttir("module {\n  tt.func @f() {\n    %a = arith.addi %b, %b : i32\n    tt.return\n  }\n}\n")
    assert info.value.line == 3


def test_custom_form_mismatch_says_what_was_expected() -> None:
    text = (
        "module {\n  tt.func @f(%x: i32) {\n    %a = tt.splat %x : i32 tensor<4xi32>\n    tt.return\n  }\n}\n"
    )
    with pytest.raises(TTIRParseError, match=r"in 'tt.splat': expected '->'"):
        parse_ttir(text)


def test_result_count_mismatch() -> None:
    text = "module {\n  tt.func @f(%x: i32) {\n    %a:2 = arith.addi %x, %x : i32\n    tt.return\n  }\n}\n"
    with pytest.raises(TTIRParseError, match="defines 2 result"):
        parse_ttir(text)


def test_generic_only_op_in_custom_form() -> None:
    text = "module {\n  tt.func @f(%x: tensor<4xf32>) {\n    %a = tt.reduce %x : f32\n    tt.return\n  }\n}\n"
    with pytest.raises(TTIRParseError, match="has no custom form"):
        parse_ttir(text)


def test_branch_to_missing_block() -> None:
    text = "module {\n  tt.func @f() {\n    cf.br ^bb7\n  }\n}\n"
    with pytest.raises(TTIRParseError, match=r"undefined block \^bb7"):
        parse_ttir(text)


def _small_module() -> str:
    return (
        "module {\n  tt.func public @k(%p: !tt.ptr<f32>) {\n"
        '    %r = tt.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32> loc("k.py":3:4)\n'
        '    %s = tt.splat %p : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>> loc("k.py":4:4)\n'
        '    %a = tt.addptr %s, %r : tensor<8x!tt.ptr<f32>>, tensor<8xi32> loc("k.py":5:4)\n'
        '    %v = tt.load %a : tensor<8x!tt.ptr<f32>> loc("k.py":6:8)\n'
        '    tt.store %a, %v : tensor<8x!tt.ptr<f32>> loc("k.py":7:4)\n'
        "    tt.return\n  }\n}\n"
    )


def test_verifier_rejects_type_errors_in_text() -> None:
    text = _small_module().replace(
        "%v = tt.load %a : tensor<8x!tt.ptr<f32>>", "%v = tt.load %s : tensor<8x!tt.ptr<f32>>"
    )
    verify(parse_ttir(text))  # still fine: same type
    bad = _small_module().replace("tt.make_range {end = 8", "tt.make_range {end = 9")
    with pytest.raises(
        VerifierError, match=r"'tt.make_range' at k.py:3:4 in @k: range \[0, 9\) does not match"
    ):
        verify(parse_ttir(bad))


def test_verifier_rejects_edited_ir() -> None:
    module = parse_ttir(_small_module())
    kernel = module.kernels[0]
    load = next(op for op in kernel.walk() if op.name == "tt.load")
    const = Operation("arith.constant", [], [i32], {"value": 1})
    kernel.entry.insert_before(load, const)
    load.set_operand(0, const.result)
    with pytest.raises(VerifierError) as info:
        verify(module)
    assert info.value.op_name == "tt.load" and "k.py:6:8" in str(info.value)
    assert "load needs a pointer" in str(info.value)


def test_verifier_rejects_use_before_definition_and_missing_terminator() -> None:
    module = parse_ttir(_small_module())
    kernel = module.kernels[0]
    ops = kernel.entry.ops
    ops.insert(0, ops.pop(2))  # move the addptr above the values it uses
    with pytest.raises(VerifierError, match="not defined before this use"):
        verify(module)
    module = parse_ttir(_small_module())
    module.kernels[0].entry.ops.pop()  # drop tt.return
    with pytest.raises(VerifierError, match="does not end in a terminator"):
        verify(module)


def test_verifier_checks_enum_attributes() -> None:
    module = parse_ttir(_small_module())
    load = next(op for op in module.walk() if op.name == "tt.load")
    load.attributes["cache"] = "bogus"
    with pytest.raises(VerifierError, match="'cache' = 'bogus' is not one of none, ca"):
        verify(module)


def test_verifier_error_for_wrong_constant_type() -> None:
    module = parse_ttir(_small_module())
    const = Operation("arith.constant", [], [f32], {"value": True})
    module.kernels[0].entry.insert(0, const)
    with pytest.raises(VerifierError, match="boolean constant must have type i1"):
        verify(module)


@triton.jit
def _needs_n(x_ptr, n, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), n)


def test_frontend_errors_name_the_problem() -> None:
    with pytest.raises(FrontendError, match="lacks argument"):
        ttir_from_jit(_needs_n, {"x_ptr": "*i32"}, {"BLOCK": 16})
    with pytest.raises(FrontendError, match="not arguments of _needs_n"):
        ttir_from_jit(_needs_n, {"x_ptr": "*i32", "n": "i32", "m": "i32"}, {"BLOCK": 16})
    with pytest.raises(FrontendError, match="Triton could not compile _needs_n"):
        ttir_from_jit(_needs_n, {"x_ptr": "*i32", "n": "i32"}, {"BLOCK": 3})  # arange needs a power of 2
    with pytest.raises(FrontendError, match="not a @triton.jit function"):
        ttir_from_jit(len, {}, {})


def test_malformed_values_are_parse_errors() -> None:
    bad_dense = "module {\n  tt.func @f() {\n    %c = arith.constant dense<[1, 2]> : tensor<3xf32>\n    tt.return\n  }\n}\n"
    with pytest.raises(TTIRParseError, match=r"dense<...> lists 2 elements but tensor<3xf32> holds 3"):
        parse_ttir(bad_dense)
    bad_desc = "module {\n  tt.func @f(%d: !tt.tensordesc<f32>) {\n    tt.return\n  }\n}\n"
    with pytest.raises(TTIRParseError, match="tensordesc wants a tensor type"):
        parse_ttir(bad_desc)
