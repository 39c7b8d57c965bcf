"""`--machine` (a value: `use_machine`, the eval worker's init message) and KEGEN_MACHINE (the default
for kernels a user runs directly) reach the backend options (and cache key), the driver's target and
device properties, the compiled kernel and the simulator it runs on."""

from __future__ import annotations

import pytest
import torch
import triton

from kegen.settings import select_machine
from lowering.backend import driver
from lowering.backend.options import MtiaOptions, arch_machine, machine_arch
from lowering.corpus.elementwise import vector_add as add_kernel
from mtia_sim.machine import load_machine

MACHINES = ("mtia-v1", "mtia-2i", "mtia-300")


def _parsed(options: dict[str, object] | None = None) -> MtiaOptions:
    """What Triton's runtime gets for a launch now: the driver's target, then parse_options."""
    from lowering.backend.compiler import MtiaBackend

    return MtiaBackend(driver.current_target()).parse_options(dict(options or {}))


def test_options_carry_the_machine_and_the_adapter_follows_kegen_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core's options are plain values (the machine among them, default mtia-2i, whatever the
    environment says); the Triton adapter's default for kernels run directly follows KEGEN_MACHINE."""
    monkeypatch.setenv("KEGEN_MACHINE", "mtia-v1")
    assert MtiaOptions().machine == "mtia-2i" and MtiaOptions().arch == "2i"
    v1 = _parsed()
    assert (v1.machine, v1.arch) == ("mtia-v1", "v1")
    assert v1.hash() != MtiaOptions(machine="mtia-2i").hash()
    assert MtiaOptions(machine="mtia-300").arch == "300"
    assert _parsed({"machine": "mtia-300"}).machine == "mtia-300"  # a launch may name its machine
    monkeypatch.delenv("KEGEN_MACHINE")
    assert _parsed().machine == "mtia-2i"


def test_arch_and_machine_names() -> None:
    assert [machine_arch(m) for m in MACHINES] == ["v1", "2i", "300"]
    assert [arch_machine(machine_arch(m)) for m in MACHINES] == list(MACHINES)
    with pytest.raises(ValueError, match="unknown mtia arch 'h100'.*2i"):
        arch_machine("h100")


def test_select_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("KEGEN_MACHINE", "mtia-2i")
    assert select_machine("mtia-300") == "mtia-300"
    assert driver.current_target().arch == "300" and _parsed().machine == "mtia-300"
    assert os.environ["KEGEN_MACHINE"] == "mtia-2i"  # a value in this process, not the environment
    from lowering.backend.options import machine_scope, use_machine

    with machine_scope("mtia-v1"):
        assert driver.current_target().arch == "v1"
    assert driver.current_target().arch == "300"
    use_machine(None)
    assert driver.current_target().arch == "2i"  # back to KEGEN_MACHINE
    with pytest.raises(ValueError, match="unknown machine 'mtia-9'.*mtia-2i"):
        select_machine("mtia-9")


@pytest.mark.parametrize("machine", MACHINES)
def test_driver_target_and_properties(monkeypatch: pytest.MonkeyPatch, machine: str) -> None:
    monkeypatch.setenv("KEGEN_MACHINE", machine)
    m = load_machine(machine)
    drv = driver.MtiaDriver()
    assert drv.get_current_target().arch == machine_arch(machine)
    props = drv.utils.get_device_properties(0)
    assert props["multiprocessor_count"] == m.num_pes
    assert props["max_shared_mem"] == m.local_store_bytes
    assert props["sm_clock_rate"] == int(m.clock_hz // 1000)


def _stream_seconds(monkeypatch: pytest.MonkeyPatch, machine: str, n: int) -> float:
    monkeypatch.setenv("KEGEN_MACHINE", machine)
    add_kernel.device_caches.clear()  # Triton binds the target once per kernel and device
    x, y = torch.randn(n), torch.randn(n)
    z = torch.empty(n)
    add_kernel[(triton.cdiv(n, 4096),)](x, y, z, n, BLOCK=4096)
    torch.testing.assert_close(z, x + y)
    res = driver.last_launch()
    assert driver._session is not None and driver._session.machine == machine
    assert driver._session.sim.machine.name == load_machine(machine).name
    return float(res.seconds)


def test_machine_changes_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DRAM-streaming kernel: time follows each machine's DRAM bandwidth (v1 < 2i << 300)."""
    n = 1 << 20  # 12 MiB of traffic: well past launch overheads
    try:
        t = {m: _stream_seconds(monkeypatch, m, n) for m in MACHINES}
    finally:
        add_kernel.device_caches.clear()
    bw = {m: load_machine(m).dram_bw for m in MACHINES}
    assert t["mtia-v1"] > t["mtia-2i"] > t["mtia-300"]
    floor = {m: 12 * n / bw[m] for m in MACHINES}  # the bytes at the machine's DRAM bandwidth
    for m in MACHINES:
        assert floor[m] <= t[m], f"{m}: {t[m]} s is faster than its DRAM allows ({floor[m]} s)"
    assert t["mtia-v1"] / t["mtia-2i"] == pytest.approx(bw["mtia-2i"] / bw["mtia-v1"], rel=0.25)


@pytest.mark.slow
def test_kegen_eval_machine_flag_changes_simulated_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`kegen eval --machine X` compiles and simulates on X (the evaluator hands the machine to its
    worker in the init message): a streaming kernel is slower on v1 than on 300, as their DRAM bandwidths (176 vs 6100
    GB/s), clocks and DMA queues say. Two machines keep it short; the driver test above covers all
    three, and their ratios, in process."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "kegen" / "examples" / "vector_add"
    problem = tmp_path / "problem.py"  # 4 MiB of traffic: DRAM time well above launch overheads
    problem.write_text((example / "problem.py").read_text().replace("N = 8192", "N = 1 << 18"))
    times = {}
    for machine in ("mtia-v1", "mtia-300"):
        proc = subprocess.run(
            [sys.executable, "-m", "kegen.cli", "eval", str(problem), str(example / "seed.py"), "--machine",
             machine, "--json", "--no-profile", "--trials", "1"], capture_output=True, text=True, timeout=600)
        result = json.loads(proc.stdout)
        assert result["status"] == "ok" and result["machine"] == machine, proc.stdout[-2000:]
        times[machine] = result["candidate_time_s"]
    assert times["mtia-v1"] > 1.5 * times["mtia-300"], times


@pytest.mark.slow
def test_kegen_eval_takes_a_machine_file_by_relative_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A machine TOML of the user's own (here: mtia-2i with a quarter of its DRAM bandwidth, in a folder under /tmp, named
    relative to the working directory) reaches the sandboxed worker, which sees neither that folder nor
    the caller's working directory: the file travels with the candidate. The kernel runs on it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from mtia_sim.machine import MACHINES_DIR

    example = Path(__file__).resolve().parents[2] / "kegen" / "examples" / "vector_add"
    text = (MACHINES_DIR / "mtia-2i.toml").read_text()
    assert "bw = 204.8e9" in text
    (tmp_path / "slow.toml").write_text(
        text.replace('name = "mtia-2i"', 'name = "slow-dram"').replace("bw = 204.8e9", "bw = 51.2e9"))
    problem = tmp_path / "problem.py"  # 4 MiB of traffic: DRAM time well above launch overheads
    problem.write_text((example / "problem.py").read_text().replace("N = 8192", "N = 1 << 18"))
    results = {}
    for machine in ("mtia-2i", "slow.toml"):
        proc = subprocess.run(
            [sys.executable, "-m", "kegen.cli", "eval", "problem.py", str(example / "seed.py"),
             "--machine", machine, "--json", "--no-profile", "--trials", "1", "--seed", "1"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path)
        result = json.loads(proc.stdout)
        assert result["status"] == "ok", proc.stdout[-2000:]
        results[machine] = result
    assert results["slow.toml"]["machine"] == "slow.toml"
    ratio = results["slow.toml"]["candidate_time_s"] / results["mtia-2i"]["candidate_time_s"]
    assert 2.0 < ratio < 4.2, ratio  # streaming at a quarter of the bandwidth (plus fixed overheads)


def test_kegen_lower_machine(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """`kegen lower --machine` compiles for that machine (metadata and target arch); a bad name is a
    one-line error naming the shipped machines."""
    import argparse

    from kegen.commands import lower

    monkeypatch.setenv("KEGEN_MACHINE", "mtia-2i")
    src = tmp_path / "kern.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def k(x_ptr, BLOCK: tl.constexpr):\n"
                   "    tl.store(x_ptr + tl.arange(0, BLOCK), tl.arange(0, BLOCK).to(tl.float32))\n")
    parser = argparse.ArgumentParser()
    lower.add_arguments(parser)
    for machine in ("mtia-v1", "mtia-300"):
        args = parser.parse_args([str(src), "--kernel", "k", "--signature", "x_ptr=*fp32", "--constexpr",
                                  "BLOCK=64", "--machine", machine, "--emit", "tile"])
        kernel, _ = lower.compile_kernel(args)
        assert kernel.metadata.machine == machine and kernel.metadata.target.arch == machine_arch(machine)
    args = parser.parse_args([str(src), "--kernel", "k", "--signature", "x_ptr=*fp32", "--constexpr", "BLOCK=64",
                              "--machine", "mtia-9"])
    with pytest.raises(lower.LowerUsageError, match="unknown machine 'mtia-9'"):
        lower.compile_kernel(args)
