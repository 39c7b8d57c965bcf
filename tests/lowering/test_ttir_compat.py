"""Triton 3.7 TTIR spellings parse into the same tile IR as Triton 3.6's (lowering/compat.py)."""

from __future__ import annotations

from lowering.ttir.parser import parse_ttir

MODULE = """module {
  tt.func public @k() attributes {noinline = false} {
    %s
    tt.return
  }
}
"""


def test_triton_37_barrier_is_the_36_barrier():
    old = parse_ttir(MODULE % "gpu.barrier")
    new = parse_ttir(MODULE % "ttg.barrier all")
    assert [op.name for op in new.functions[0].body.blocks[0].ops] == ["gpu.barrier", "tt.return"]
    assert str(new) == str(old)


DESC_MODULE = """module {
  tt.func public @k(%p: !tt.ptr<f32>, %m: i32, %n: i32, %s: i64) attributes {noinline = false} {
    %c1 = arith.constant 1 : i64
    %d = tt.make_tensor_descriptor %p, [%m, %n], [%s, %c1] : <f32>, <BLOCK>
    %c0 = arith.constant 0 : i32
    %t = tt.descriptor_load %d[%c0, %c0] : !tt.tensordesc<BLOCK> -> tensor<16x8xf32>
    tt.return
  }
}
"""


def test_triton_38_bare_descriptor_blocks_are_the_37_tensor_blocks():
    old = parse_ttir(DESC_MODULE.replace("BLOCK", "tensor<16x8xf32>"))
    new = parse_ttir(DESC_MODULE.replace("BLOCK", "16x8xf32"))
    assert str(new) == str(old) and "tensordesc" in str(new)
