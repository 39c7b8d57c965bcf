"""@triton.jit → TTIR through Triton's own frontend and TTIR passes (no GPU), → tile IR."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton
import triton.language as tl

from lowering.corpus import CORPUS, get_entry
from lowering.ir import PointerType, TensorType, f32, verify
from lowering.ttir import module_from_jit, ttir_from_jit
from lowering.ttir.frontend import FrontendOptions, timed_ttir_from_jit


@triton.jit
def _scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * factor, mask=m)


SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "factor": "fp32"}


def test_module_from_jit_gives_a_verified_kernel_with_constexprs_folded() -> None:
    module = module_from_jit(_scale, SIG, {"BLOCK": 128}, divisible_by_16=["x_ptr", "out_ptr"])
    verify(module)
    kernel = module.get_function("_scale")
    assert kernel.arg_types == [PointerType(f32), PointerType(f32), kernel.arg_types[2], f32]
    assert [kernel.arg_attr(i, "tt.divisibility") for i in range(4)] == [16, 16, None, None]
    ranges = [op for op in kernel.walk() if op.name == "tt.make_range"]
    assert ranges[0].result.type == TensorType((128,), kernel.arg_types[2])
    assert "BLOCK" not in [a.name_hint for a in kernel.args]


def test_ttir_text_carries_locations_of_this_file() -> None:
    text = ttir_from_jit(_scale, SIG, {"BLOCK": 64})
    assert Path(__file__).name in text and "tt.func public @_scale" in text
    plain = ttir_from_jit(_scale, SIG, {"BLOCK": 64}, options=FrontendOptions(locations=False))
    assert "loc(" not in plain


def test_block_pointers_kept_or_rewritten() -> None:
    from triton._C.libtriton import passes

    from lowering.compat import emits_block_pointers

    entry = get_entry("block_ptr_matmul")
    kept = {op.name for op in entry.module().walk()}
    if emits_block_pointers(passes.ttir):  # Triton 3.6/3.7; 3.8's frontend gives pointer tensors
        assert {"tt.make_tensor_ptr", "tt.advance"} <= kept
    else:
        assert not {"tt.make_tensor_ptr", "tt.advance"} & kept and "tt.dot" in kept
    rewritten = {op.name for op in get_entry("block_ptr_matmul_rewritten").module().walk()}
    assert not {"tt.make_tensor_ptr", "tt.advance"} & rewritten


def test_without_passes_the_frontend_output_is_kept() -> None:
    raw = ttir_from_jit(
        get_entry("call_noinline_helper").fn,
        get_entry("call_noinline_helper").signature,
        {"BLOCK": 32},
        options=FrontendOptions(run_passes=False),
    )
    cooked = get_entry("call_noinline_helper").ttir()
    assert raw.count("tt.call") > cooked.count("tt.call")  # the inliner removed the inlinable helper


def test_timed_frontend_reports_seconds() -> None:
    text, seconds = timed_ttir_from_jit(_scale, SIG, {"BLOCK": 32})
    assert "tt.func" in text and 0 < seconds < 30


def test_corpus_entries_have_consistent_signatures() -> None:
    for entry in CORPUS.values():
        args = [a for a in entry.fn.arg_names if a not in entry.constexprs]
        assert sorted(args) == sorted(entry.signature), entry.name
        assert set(entry.outputs) <= set(entry.signature), entry.name
        if entry.numeric and entry.outputs:
            inputs = entry.make_args(0)
            assert sorted(inputs) == sorted(entry.signature), entry.name
            expected = entry.reference(dict(inputs))
            assert set(expected) == set(entry.outputs), entry.name


@pytest.mark.slow
def test_corpus_references_match_triton_interpreter() -> None:
    """Runs every kernel in Triton's CPU interpreter and compares with its PyTorch reference."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-m", "lowering.corpus.interpret"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("\nok ") + proc.stdout.startswith("ok ") >= 35
