"""The Triton backend and driver of target mtia: discovery, stages, artifacts, caching, launch API."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.language.extra import libdevice

from lowering.backend import driver
from lowering.backend.compiler import MtiaBackend
from lowering.backend.driver import MtiaDriver
from lowering.options import MtiaOptions
from lowering.pipeline import STAGES, compile_ttir

TARGET = GPUTarget("mtia", "2i", 1)


@triton.jit
def axpy_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + y, mask=m)


@triton.jit
def libdevice_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    tl.store(
        y_ptr + offs,
        libdevice.tanh(x) + libdevice.rsqrt(tl.abs(x) + 1.0) + libdevice.pow(tl.abs(x), 1.5),
        mask=m,
    )


def test_driver_is_the_active_one_without_gpu() -> None:
    assert MtiaDriver.is_active() == (not torch.cuda.is_available())
    d = MtiaDriver()
    assert d.get_current_target() == TARGET
    assert d.get_active_torch_device() == torch.device("cpu")
    assert d.utils.get_device_properties(0)["max_shared_mem"] == 384 * 1024
    assert MtiaBackend.supports_target(TARGET) and not MtiaBackend.supports_target(GPUTarget("cuda", 90, 32))


def test_stages_in_order_and_every_artifact_kept() -> None:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32", "n": "i32", "BLOCK": "constexpr"}
    k = triton.compile(ASTSource(axpy_kernel, sig, {"BLOCK": 64}), target=TARGET)
    assert [s for s in k.asm if s in STAGES] == list(STAGES)
    assert "tt.func public @axpy_kernel" in k.asm["ttir"]
    assert "DMA(block)" in k.asm["tile"]
    assert "define void @axpy_kernel" in k.asm["llir"]
    assert "axpy_kernel:" in k.asm["rvasm"] and "sd\t" in k.asm["rvasm"]
    assert k.kernel[:4] == b"\x7fELF" and k.asm["elf"] == k.kernel
    assert k.metadata.mtia_arg_types == ["*fp32", "*fp32", "fp32", "i32"]
    # the same compilation again is a cache hit with the same bytes
    k2 = triton.compile(ASTSource(axpy_kernel, sig, {"BLOCK": 64}), target=TARGET)
    assert k2.kernel == k.kernel and k2.hash == k.hash
    # other options, other key
    k3 = triton.compile(ASTSource(axpy_kernel, sig, {"BLOCK": 64}), target=TARGET, options={"num_stages": 2})
    assert k3.hash != k.hash


def test_compile_ttir_without_triton_runtime() -> None:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32", "n": "i32", "BLOCK": "constexpr"}
    ttir = triton.compile(ASTSource(axpy_kernel, sig, {"BLOCK": 32}), target=TARGET).asm["ttir"]
    ck = compile_ttir(ttir, MtiaOptions(opt_level=3))
    assert list(ck.artifacts) == list(STAGES)
    assert ck.name == "axpy_kernel" and ck.elf[:4] == b"\x7fELF"
    assert ck.local_store_peak == 256


def test_launch_history_api_and_in_place_update() -> None:
    driver.clear_launch_history()
    n = 300
    x, y = torch.randn(n), torch.randn(n)
    y0 = y.clone()
    axpy_kernel[(triton.cdiv(n, 128),)](x, y, 2.0, n, BLOCK=128)
    torch.testing.assert_close(y, 2 * x + y0)
    hist = driver.launch_history()
    assert len(hist) == 1 and hist[0].kernel == "axpy_kernel" and hist[0].grid == (3, 1, 1)
    res = driver.last_launch()
    assert res is hist[0].result and res.cycles > 0 and res.seconds > 0 and res.programs == 3
    assert res.counters is not None
    driver.clear_launch_history()
    assert driver.launch_history() == []
    driver.enable_launch_history(False)
    try:
        for _ in range(2):
            axpy_kernel[(1,)](x, y, 0.0, n, BLOCK=128)
        assert len(driver.launch_history()) == 1
    finally:
        driver.enable_launch_history(True)


def test_strided_views_and_offsets() -> None:
    base = torch.randn(4, 100)
    x = base[1]  # non-zero storage offset
    y = torch.zeros(3, 100)[2]
    axpy_kernel[(1,)](x, y, 1.0, 100, BLOCK=128)
    torch.testing.assert_close(y, base[1])


def test_benchmarker_reports_simulated_time() -> None:
    bench = MtiaDriver().get_benchmarker()
    n = 256
    x, y = torch.randn(n), torch.randn(n)
    ms = bench(lambda: axpy_kernel[(2,)](x, y, 1.0, n, BLOCK=128), quantiles=None)
    assert 0 < ms < 1  # simulated milliseconds, not host time
    assert abs(ms - driver.last_launch().seconds * 1e3) < 1e-9


def test_libdevice_maps_to_simd_ops() -> None:
    n = 50
    x = torch.randn(n)
    y = torch.empty(n)
    libdevice_kernel[(1,)](x, y, n, BLOCK=64)
    ref = torch.tanh(x) + torch.rsqrt(x.abs() + 1) + x.abs() ** 1.5
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)
