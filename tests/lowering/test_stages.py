"""Every mtia stage is a pure function of the previous artifact: the tile IR parses back, an edited
stage file (Triton's `ir_override`, `TRITON_KERNEL_OVERRIDE`, or `compile_from`) changes what the
later stages and the simulated run do, and the elf stage is a linked executable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from lowering.corpus import CORPUS
from lowering.ir.printer import print_module
from lowering.options import MtiaOptions
from lowering.pipeline import STAGES, compile_from, compile_ttir, make_tile
from lowering.ttir.parser import parse_ttir
from mtia_sim.loader import link

MTIA = GPUTarget("mtia", "2i", 1)
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
NOT_LOWERED = {"associative_scan_recurrence"}  # fails clearly (tests/lowering/test_lower_corpus.py)


@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _compile(**options: object) -> triton.compiler.CompiledKernel:
    with knobs.compilation.scope():
        knobs.compilation.always_compile = True
        return triton.compile(ASTSource(add_kernel, SIG, {"BLOCK": 64}), target=MTIA, options=options)


@pytest.fixture(scope="module")
def base() -> triton.compiler.CompiledKernel:
    return _compile()


def _run(**kw: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = 100
    x, y, z = torch.randn(n), torch.randn(n), torch.zeros(n)
    add_kernel[(triton.cdiv(n, 64),)](x, y, z, n, BLOCK=64, **kw)
    return x, y, z


@pytest.mark.parametrize("name", [n for n in CORPUS if n not in NOT_LOWERED])
def test_tile_ir_round_trips(name: str) -> None:
    """The tile stage's text parses back to the same module (whole corpus)."""
    tile = make_tile(CORPUS[name].ttir(), {}, MtiaOptions())
    module = parse_ttir(tile)
    again = print_module(module, locations=True)
    assert again == print_module(parse_ttir(again), locations=True)
    assert tile.startswith(again), "the tile text is the module, then comments"


def test_stages_chain_and_start_anywhere(base: triton.compiler.CompiledKernel) -> None:
    """compile_from(stage, artifact) reproduces every later artifact of the full compilation."""
    asm = base.asm
    assert list(asm)[: len(STAGES)] == list(STAGES) or set(STAGES) <= set(asm)
    for stage in ("ttir", "tile", "llir", "rvasm"):
        later = compile_from(stage, asm[stage], MtiaOptions()).artifacts
        for nxt in STAGES[STAGES.index(stage) + 1 :]:
            assert later[nxt] == asm[nxt], f"{nxt} from {stage} differs"
    assert compile_ttir(asm["ttir"]).artifacts["elf"] == asm["elf"]


def test_elf_is_a_linked_executable(base: triton.compiler.CompiledKernel) -> None:
    elf = base.asm["elf"]
    assert elf[:4] == b"\x7fELF" and elf[16] == 2  # e_type ET_EXEC
    image = link([elf], "add_kernel")
    assert image.symbols["add_kernel"] == image.entry and image.size > 0


def test_override_ttir_changes_the_result(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    edited = tmp_path / "add_kernel.ttir"
    edited.write_text(base.asm["ttir"].replace("arith.addf", "arith.mulf"))
    x, y, z = _run(ir_override=str(edited))
    torch.testing.assert_close(z, x * y)


def test_override_tile_changes_the_result(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    edited = tmp_path / "add_kernel.tile"
    edited.write_text(base.asm["tile"].replace("arith.addf", "arith.subf"))
    x, y, z = _run(ir_override=str(edited))
    torch.testing.assert_close(z, x - y)
    x, y, z = _run()
    torch.testing.assert_close(z, x + y)


def test_override_llir_reaches_rvasm(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    edited = tmp_path / "add_kernel.llir"
    edited.write_text(base.asm["llir"] + "\ndefine i64 @kegen_marker() {\n  ret i64 42\n}\n")
    k = _compile(ir_override=str(edited))
    assert "kegen_marker:" in k.asm["rvasm"] and "kegen_marker" in link([k.asm["elf"]], "add_kernel").symbols


def test_override_rvasm_reaches_elf(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    marker = "\t.text\n\t.globl\tkegen_marker\n\t.p2align\t1\nkegen_marker:\n\tret\n"
    edited = tmp_path / "add_kernel.rvasm"
    edited.write_text(base.asm["rvasm"] + marker)
    k = _compile(ir_override=str(edited))
    assert "kegen_marker" in link([k.asm["elf"]], "add_kernel").symbols


def test_override_elf_is_what_runs(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    sub = compile_from("tile", base.asm["tile"].replace("arith.addf", "arith.subf"), MtiaOptions())
    edited = tmp_path / "add_kernel.elf"
    edited.write_bytes(sub.elf)
    assert _compile(ir_override=str(edited)).asm["elf"] == sub.elf
    x, y, z = _run(ir_override=str(edited))
    torch.testing.assert_close(z, x - y)


def test_triton_kernel_override_dir(tmp_path: Path, base: triton.compiler.CompiledKernel) -> None:
    """TRITON_KERNEL_OVERRIDE: a file named like the cached stage, under the source hash's folder."""
    from triton.runtime.cache import _base32

    src = ASTSource(add_kernel, SIG, {"BLOCK": 64})
    folder = tmp_path / _base32(src.hash())
    folder.mkdir()
    (folder / "add_kernel.tile").write_text(base.asm["tile"].replace("arith.addf", "arith.mulf"))
    with knobs.compilation.scope(), knobs.cache.scope():
        knobs.compilation.always_compile = True
        knobs.compilation.override = True
        knobs.cache.override_dir = str(tmp_path)
        k = triton.compile(src, target=MTIA)
    assert "arith.mulf" in k.asm["tile"] and k.asm["llir"] != base.asm["llir"]


def test_llir_header_carries_the_local_store_layout(base: triton.compiler.CompiledKernel) -> None:
    head = base.asm["llir"].split("; ModuleID", 1)[0]
    assert re.search(r"^; local store: peak \d+ B, plan (spread|packed|compact)$", head, re.M)
    assert "; commands issued (static):" in head


@pytest.mark.parametrize("name", ["vector_add", "matmul_k_loop", "tensor_descriptor_scale", "call_noinline_helper"])
def test_one_path_from_jit_to_ttir(name: str) -> None:
    """The corpus checks the TTIR that `kernel[grid]` compiles (the mtia backend's ttir stage)."""
    if name not in CORPUS:
        pytest.skip(f"{name} is no longer in the corpus")
    entry = CORPUS[name]
    sig = {n: ("constexpr" if n in entry.constexprs else entry.signature[n]) for n in entry.fn.arg_names}
    attrs = {(entry.fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in entry.divisible_by_16}
    with knobs.compilation.scope():
        knobs.compilation.always_compile = True
        k = triton.compile(ASTSource(entry.fn, sig, dict(entry.constexprs), attrs or None), target=MTIA)
    assert entry.ttir() == k.asm["ttir"]
