"""Triton-version differences in TTIR spellings, mapped onto the forms the tile IR knows.

The tile IR's op set follows Triton 3.6. Triton 3.7 prints some ops differently; each entry here
rewrites a 3.7 form into the 3.6 one before the builder looks the op up, so parsing, passes and
codegen see one dialect whichever Triton produced the text.
"""

from __future__ import annotations

from dataclasses import replace

from lowering.ttir.raw import RawOp


def _barrier(raw: RawOp) -> RawOp:
    # 3.7: `ttg.barrier all` (address spaces to order); 3.6: `gpu.barrier` (orders everything)
    return replace(raw, name="gpu.barrier", items=[])


REWRITES = {
    "ttg.barrier": _barrier,
}


def normalize(raw: RawOp) -> RawOp:
    """`raw` in the spelling the tile IR uses (unchanged when it already is)."""
    fix = REWRITES.get(raw.name)
    return fix(raw) if fix is not None else raw
