"""Every corpus kernel compiles to TTIR through Triton, parses, verifies, prints and re-parses to the
same module (pretty and generic forms, locations kept); together they cover the ops issue #4 lists."""

import functools

import pytest

from lowering.corpus import CORPUS
from lowering.ir import print_module, verify
from lowering.ir.equivalence import module_difference
from lowering.ir.module import Module
from lowering.ttir import parse_ttir


@functools.cache
def _ttir(name: str) -> str:
    return CORPUS[name].ttir()


@functools.cache
def _module(name: str) -> Module:
    return parse_ttir(_ttir(name))


def test_corpus_has_at_least_30_kernels() -> None:
    assert len(CORPUS) >= 30
    assert len({e.fn for e in CORPUS.values()}) >= 30


@pytest.mark.parametrize("name", list(CORPUS))
def test_round_trip(name: str) -> None:
    module = _module(name)
    verify(module)
    assert module.kernels, "a kernel must be public"
    for generic in (False, True):
        text = print_module(module, locations=True, generic=generic)
        again = parse_ttir(text)
        verify(again)
        assert module_difference(module, again, locations=True) is None
        assert print_module(again, locations=True, generic=generic) == text


@pytest.mark.parametrize("name", list(CORPUS))
def test_locations_point_into_the_kernel_source(name: str) -> None:
    entry = CORPUS[name]
    source = entry.fn.fn.__code__.co_filename
    kernel = _module(name).get_function(entry.fn.__name__)
    kernel_ops = [op for op in kernel.walk() if op.location.outermost().file == source]
    assert kernel_ops, "ops must carry the kernel's file:line"
    first_line = entry.fn.fn.__code__.co_firstlineno
    assert all(op.location.outermost().line >= first_line for op in kernel_ops)


REQUIRED_OPS = {
    "tt.get_program_id",
    "tt.get_num_programs",
    "tt.make_range",
    "tt.splat",
    "tt.broadcast",
    "tt.expand_dims",
    "tt.reshape",
    "tt.trans",
    "tt.join",
    "tt.split",
    "tt.cat",
    "tt.addptr",
    "tt.load",
    "tt.store",
    "tt.atomic_rmw",
    "tt.atomic_cas",
    "tt.dot",
    "tt.dot_scaled",
    "tt.reduce",
    "tt.reduce.return",
    "tt.scan",
    "tt.scan.return",
    "tt.histogram",
    "tt.gather",
    "tt.make_tensor_ptr",
    "tt.advance",
    "tt.make_tensor_descriptor",
    "tt.descriptor_load",
    "tt.descriptor_store",
    "tt.clampf",
    "tt.precise_sqrt",
    "tt.precise_divf",
    "tt.fp_to_fp",
    "tt.int_to_ptr",
    "tt.ptr_to_int",
    "tt.bitcast",
    "tt.call",
    "tt.return",
    "tt.print",
    "tt.assert",
    "tt.mulhiui",
    "scf.for",
    "scf.while",
    "scf.if",
    "scf.yield",
    "scf.condition",
    "cf.cond_br",
    "arith.constant",
    "arith.addf",
    "arith.mulf",
    "arith.cmpi",
    "arith.cmpf",
    "arith.select",
    "arith.sitofp",
    "arith.extsi",
    "arith.truncf",
    "math.exp",
    "math.log",
    "math.fma",
}


def test_corpus_covers_the_issue_op_list() -> None:
    from triton._C.libtriton import passes

    from lowering.compat import ops_not_emitted

    seen = {op.name for name in CORPUS for op in _module(name).walk()}
    missing = REQUIRED_OPS - ops_not_emitted(passes.ttir) - seen  # Triton 3.8 folds/materialises some
    assert not missing, f"corpus never produces {sorted(missing)}"


def test_matmul_structure_is_what_lowering_needs() -> None:
    module = _module("matmul_k_loop")
    kernel = module.get_function("matmul")
    loops = [op for op in kernel.walk() if op.name == "scf.for"]
    assert len(loops) == 1
    loop = loops[0]
    body = loop.regions[0].entry
    assert body.args[0].type == loop.operands[0].type  # induction variable
    assert [a.type.shape for a in body.args[1:]] == [(32, 16)]  # the accumulator
    dots = [op for op in body.ops if op.name == "tt.dot"]
    assert len(dots) == 1 and dots[0].attributes["inputPrecision"] == "ieee"
    a, b, c = dots[0].operands
    assert (a.type.shape, b.type.shape, c.type.shape) == ((32, 16), (16, 16), (32, 16))
    loads = [op for op in body.ops if op.name == "tt.load"]
    assert all(len(op.operands) == 3 for op in loads)  # ptr, mask, other
