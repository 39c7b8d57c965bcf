"""`kegen lower`: compile a kernel file for mtia / nvidia / amd, print any stage, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.cli import main

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def odd_reduce(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(y_ptr, tl.reduce(x, 0, _combine))


@triton.jit
def _combine(a, b):
    return a * b + 1.0
"""
SIG = "x_ptr=*fp32,y_ptr=*fp32,z_ptr=*fp32,n=i32"


@pytest.fixture
def kfile(tmp_path: Path) -> Path:
    p = tmp_path / "kern.py"
    p.write_text(KERNEL)
    return p


def _lower(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lower", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _lower_add(
    capsys: pytest.CaptureFixture[str], kfile: Path, *extra: str, block: int = 256
) -> tuple[int, str, str]:
    """Lower `add_kernel` of `kfile` with the standard signature, BLOCK=`block` and `extra` arguments."""
    args = ["--kernel", "add_kernel", "--signature", SIG, "--constexpr", f"BLOCK={block}"]
    return _lower(capsys, str(kfile), *args, *extra)


@pytest.mark.parametrize(
    "emit,needle",
    [
        ("ttir", "tt.func public @add_kernel"),
        ("tile", "DMA(block)"),
        ("llir", "define void @add_kernel"),
        ("rvasm", "add_kernel:"),
    ],
)
def test_mtia_text_stages(kfile: Path, capsys: pytest.CaptureFixture[str], emit: str, needle: str) -> None:
    rc, out, err = _lower_add(capsys, kfile, "--target", "mtia", "--emit", emit)
    assert rc == 0, err
    assert needle in out


def test_mtia_elf_needs_output_file(kfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _lower_add(capsys, kfile, "--emit", "elf")
    assert rc == 1 and "-o FILE" in err
    out = tmp_path / "k.o"
    rc, _, err = _lower_add(capsys, kfile, "--emit", "elf", "-o", str(out), "--option", "num_stages=2")
    assert rc == 0, err
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_nvidia_ptx_and_amd_gcn_without_gpu(kfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _lower_add(capsys, kfile, "--target", "nvidia")
    assert rc == 0, err
    assert ".target sm_90a" in out and "ld.global" in out
    rc, out, err = _lower_add(capsys, kfile, "--target", "amd", "--arch", "gfx90a")
    assert rc == 0, err
    assert "gfx90a" in out and "global_load" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--kernel", "nope", "--signature", SIG, "--constexpr", "BLOCK=8"],
            "no @triton.jit function 'nope'",
        ),
        (
            ["--kernel", "add_kernel", "--signature", "x_ptr=*fp33", "--constexpr", "BLOCK=8"],
            "bad type '*fp33'",
        ),
        (["--kernel", "add_kernel", "--signature", "x_ptr=*fp32", "--constexpr", "BLOCK=8"], "needs a type"),
        (["--kernel", "add_kernel", "--signature", SIG], "BLOCK needs a value"),
        (
            ["--kernel", "add_kernel", "--signature", SIG + ",w=i32", "--constexpr", "BLOCK=8"],
            "has no argument w",
        ),
        (
            ["--kernel", "add_kernel", "--signature", SIG, "--constexpr", "BLOCK=8", "--emit", "ptx"],
            "not a stage",
        ),
        (
            ["--kernel", "add_kernel", "--signature", SIG, "--constexpr", "BLOCK=1048576"],
            "do not fit in the local store",
        ),
        (
            ["--kernel", "odd_reduce", "--signature", "x_ptr=*fp32,y_ptr=*fp32", "--constexpr", "BLOCK=8"],
            "op tt.reduce",
        ),
    ],
)
def test_errors_are_one_clear_line(
    kfile: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rc, out, err = _lower(capsys, str(kfile), *argv)
    assert rc == 1
    assert message in err
    assert "Traceback" not in err and err.startswith("kegen lower: error:")


def test_mtia_arch_selects_the_machine(kfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """mtia-v1 has a 128 KiB local store: blocks that fit on 2i (384 KiB) do not fit there."""
    rc, out, err = _lower_add(capsys, kfile, "--emit", "tile", "--arch", "2i", block=32768)
    assert rc == 0, err
    rc, out, err = _lower_add(capsys, kfile, "--emit", "tile", "--arch", "v1", block=32768)
    assert rc == 1 and "capacity is 131072 B" in err
    rc, out, err = _lower_add(capsys, kfile, "--emit", "tile", "--arch", "v9", block=32768)
    assert rc == 1 and "unknown mtia arch 'v9'" in err
