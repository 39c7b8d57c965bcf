"""Triton version differences, in one place (torch's are in `kegen.compat`).

The mtia backend supports Triton 3.6, 3.7 and 3.8 (and follows 3.9's backend API). Everything that
differs between them is handled here and nowhere else; the callers hand in Triton's objects, so this
module imports no Triton itself (the compiler core below the backend stays Triton-free):

- TTIR spellings (`normalize`): the tile IR's op set follows Triton 3.6; each `REWRITES` entry turns
  a later spelling into the 3.6 one before the builder looks the op up, so parsing, passes and
  codegen see one dialect whichever Triton produced the text.
- TTIR type spellings (`normalize_text`): 3.8 prints a tensor descriptor's block bare
  (`!tt.tensordesc<16x16xf32>`); 3.6/3.7 as a tensor type (`!tt.tensordesc<tensor<16x16xf32>>`).
- TTIR passes (`add_rewrite_tensor_pointer`): 3.8 materialises block pointers in its frontend and
  dropped the `rewrite_tensor_pointer` pass.
- Driver (`DriverUtilsCompat`): 3.8 unloads a kernel's module when the compiled kernel is freed
  (`driver.active.utils.unload_module`).
- Options (`carry_runtime_options`): 3.9's runtime passes `fpsan_homomorphic_casts` to every
  backend and rejects a launch whose parsed options lack it. (3.9 also reads `warp_size` from the
  kernel's metadata, which `MtiaOptions.warp_size` provides for every release.)
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowering.ttir.raw import RawOp

# the Triton releases the mtia backend is tested with (pyproject.toml's range)
TESTED_TRITON = ("3.6", "3.7", "3.8")


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


# 3.8: `!tt.tensordesc<16x16xf32>` and make_tensor_descriptor's short result type `<16x16xf32>`
_BARE_DESC_TYPE = re.compile(r"!tt\.tensordesc<(?!tensor<)([0-9][^<>]*)>")
_BARE_DESC_RESULT = re.compile(
    r"(tt\.make_tensor_descriptor\b[^\n]*:\s*<[^<>\n]*>,\s*)<(?!tensor<)([0-9][^<>\n]*)>"
)


def normalize_text(text: str) -> str:
    """TTIR text with type spellings the grammar does not know turned into the 3.6/3.7 ones (the
    text is returned as is when it has none)."""
    if "tensordesc<" not in text and "make_tensor_descriptor" not in text:
        return text
    text = _BARE_DESC_TYPE.sub(r"!tt.tensordesc<tensor<\1>>", text)
    return _BARE_DESC_RESULT.sub(r"\1<tensor<\2>>", text)


def emits_block_pointers(ttir_passes: Any) -> bool:
    """Whether this Triton's frontend can emit block pointers (`tt.make_tensor_ptr`/`tt.advance`):
    3.6 and 3.7 do (and have the pass that rewrites them); 3.8 materialises them as pointer tensors
    in the frontend and dropped the pass. `ttir_passes` is `triton._C.libtriton.passes.ttir`."""
    return hasattr(ttir_passes, "add_rewrite_tensor_pointer")


def add_rewrite_tensor_pointer(ttir_passes: Any, pm: Any) -> bool:
    """Add Triton's block-pointer rewrite (block pointers -> pointer tensors) to the pass manager `pm`
    where this Triton has it (`emits_block_pointers`); returns whether it was added."""
    if not emits_block_pointers(ttir_passes):
        return False
    ttir_passes.add_rewrite_tensor_pointer(pm)
    return True


# ops Triton 3.8's frontend and clean-up passes no longer leave in TTIR: block pointers are
# materialised, a ptr_to_int/int_to_ptr round trip is folded (3.6/3.7 TTIR still has them; the
# tile IR reads both)
GONE_IN_38 = frozenset({"tt.make_tensor_ptr", "tt.advance", "tt.ptr_to_int", "tt.int_to_ptr"})


def ops_not_emitted(ttir_passes: Any) -> frozenset[str]:
    """TTIR ops this Triton no longer produces from Triton source (see `GONE_IN_38`)."""
    return frozenset() if emits_block_pointers(ttir_passes) else GONE_IN_38


class DriverUtilsCompat:
    """Driver-utility methods some Triton releases call and others do not (a base of the mtia
    driver's utilities)."""

    def unload_module(self, module: Any) -> None:
        """3.8+: a compiled kernel is freed; mtia's 'module' is the kernel's bytes (nothing to free)."""
        return None


# options Triton's runtime passes to every backend and then requires in the parsed options (3.9:
# `fpsan_homomorphic_casts`, for NVIDIA's float sanitizer); mtia carries them and ignores them
RUNTIME_PASSED_OPTIONS: dict[str, Any] = {"fpsan_homomorphic_casts": False}


def carry_runtime_options(options: Any, passed: dict[str, Any]) -> Any:
    """`options` (a backend's parsed options) with each `RUNTIME_PASSED_OPTIONS` entry it has no
    field for set as a plain attribute (the value `passed` gave, else the default); returns it."""
    for name, default in RUNTIME_PASSED_OPTIONS.items():
        if name not in vars(options):
            object.__setattr__(options, name, passed.get(name, default))
    return options
