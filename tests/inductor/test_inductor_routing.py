"""torch.compile onto the simulated MTIA: small multi-layer models end to end, per-kernel counters."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn as nn

import kegen.inductor as ki
from kegen.inductor.routing import host_ops


def test_mlp_with_layernorm_and_gelu_runs_every_kernel_on_the_simulator() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    compiled = ki.compile(model, machine="mtia-2i")
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    run = compiled.last_run
    assert run is not None and run.host_ops == []  # the GEMMs ran on the device too
    names = [k.kernel for k in run.kernels]
    assert names.count("kegen_matmul_kernel") == 2 and any("layer_norm" in n for n in names)
    assert all(k.cycles > 0 and k.counters.totals["DMA"].commands > 0 for k in run.kernels)
    assert run.seconds == pytest.approx(sum(k.seconds for k in run.kernels))


@pytest.mark.slow
def test_small_conv_net_runs_end_to_end_with_counters() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)).eval()
    x = torch.randn(1, 3, 8, 8)
    compiled = ki.compile(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    run = compiled.last_run
    assert run is not None and run.host_ops == []
    assert [k.kernel for k in run.kernels][0] == "kegen_conv_kernel"
    assert len(run.kernels) >= 2 and run.cycles > 0


def test_a_second_call_records_only_its_own_launches() -> None:
    compiled = ki.compile(lambda a: torch.softmax(a, -1) * 2)
    x = torch.randn(4, 16)
    compiled(x)
    first = [k.kernel for k in compiled.last_run.kernels]
    compiled(x)
    assert [k.kernel for k in compiled.last_run.kernels] == first and len(first) == 1
    from kegen.eval.timing_mtia import backend_status

    assert backend_status() is None  # the mtia driver is the active one again (kegen.eval checks it)


def test_host_ops_names_library_calls_but_not_comments_or_lowered_gemms() -> None:
    code = """
        # Original ATen: [aten.mm]
        buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
        extern_kernels.mm(arg0_1, arg1_1, out=buf0)
        buf1 = torch.ops.aten.linalg_inv_ex.default(buf0)
    """
    assert host_ops(code) == ["torch.ops.aten.linalg_inv_ex.default"]
    assert "extern_kernels.mm" in host_ops(code, lowered=False)


def test_simulated_benchmarker_installed_with_or_without_the_registry(monkeypatch: Any) -> None:
    """torch >= 2.12 has `register_benchmarker`; older releases (the GPU machine's 2.11) only
    `Benchmarker.benchmark_cpu`: either way Inductor's CPU autotuning is timed on the simulator."""
    from torch._inductor.runtime import benchmarking

    from kegen.inductor.backend.driver import simulated_cpu_benchmark
    from kegen.inductor.routing import install_benchmarker

    registered: dict[str, Any] = {}
    monkeypatch.setattr(
        benchmarking,
        "register_benchmarker",
        lambda dev, fn, override=False: registered.update({dev: fn}),
        raising=False,
    )
    install_benchmarker()
    assert registered == {"cpu": simulated_cpu_benchmark}
    monkeypatch.delattr(benchmarking, "register_benchmarker")
    monkeypatch.setattr(benchmarking.Benchmarker, "benchmark_cpu", lambda *a, **k: "wall clock")
    install_benchmarker()
    bench = benchmarking.Benchmarker()
    calls: list[int] = []
    monkeypatch.setattr(
        "kegen.inductor.backend.driver.simulated_cpu_benchmark",
        lambda _s, fn, **kw: calls.append(kw["rep"]) or 1.5,
    )
    assert bench.benchmark_cpu(lambda: None, 5, 7) == 1.5 and calls == [7]  # positional warmup, rep


def test_an_inductor_option_this_torch_lacks_is_a_warning(monkeypatch: Any) -> None:
    from kegen.inductor import routing

    monkeypatch.setitem(routing.INDUCTOR_CONFIG, "mtia.no_such_option_anywhere", True)
    with pytest.warns(UserWarning, match="no Inductor option 'mtia.no_such_option_anywhere'"):
        routing.enable()
