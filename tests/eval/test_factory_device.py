"""The worker's default device for tensors a candidate makes without one (factory_device): the
constructors `with torch.device(...)` rewrites land there, and no torch function mode is active,
so the candidate's other torch calls (strides, data pointers, views) cost no Python dispatch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run in a fresh interpreter: the wrappers are installed process-wide, and other tests snapshot
# torch's functions for the tamper guard.
SCRIPT = textwrap.dedent(
    """
    import torch
    from torch.utils._device import DeviceContext
    from kegen.eval.sandboxed.factory_device import factory_device, install_factory_device

    calls = []
    original = DeviceContext.__torch_function__
    def counted(self, func, types, args=(), kwargs=None):
        calls.append(func)
        return original(self, func, types, args, kwargs)
    DeviceContext.__torch_function__ = counted

    install_factory_device()
    install_factory_device()  # idempotent: one wrapper, not two
    assert torch.empty.__wrapped__.__name__ == "empty", torch.empty

    with factory_device("meta"):
        assert torch._C._len_torch_function_stack() == 0
        made = {
            "empty": torch.empty(3), "zeros": torch.zeros(2, 2), "arange": torch.arange(4),
            "full": torch.full((2,), 1.5), "tensor": torch.tensor([1.0, 2.0]), "randn": torch.randn(3),
            "fftfreq": torch.fft.fftfreq(4),
        }
        for name, t in made.items():
            assert t.device.type == "meta", (name, t.device)
        assert torch.zeros(2, device="cpu").device.type == "cpu"  # a named device wins
        x = made["empty"]
        x.reshape(3, 1).stride(0), x.view(1, 3).shape
    assert calls == [], calls
    assert torch.empty(3).device.type == "cpu"  # no default outside the block

    with factory_device("cpu"):
        assert torch.empty(1).device.type == "cpu"

    # the evaluator's own `with torch.device(...)` (model construction) still works with the wrappers
    with torch.device("meta"):
        assert torch.empty(2).device.type == "meta" and torch.ones(1).device.type == "meta"
    try:
        with factory_device("meta"):
            raise KeyError("boom")
    except KeyError:
        pass
    assert torch.empty(1).device.type == "cpu"  # restored after an exception
    print("ok")
    """
)


def test_constructors_land_on_the_default_device_without_a_torch_function_mode():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith("ok")
