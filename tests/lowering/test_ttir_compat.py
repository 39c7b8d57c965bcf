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
