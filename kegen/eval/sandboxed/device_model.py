"""The worker's side of device-resident data (mtia): the model's tensors, the inputs and outputs.

Runs in the candidate's worker only. After construction the model's parameters, buffers and
tensor attributes are uploaded to the evaluator's device (not charged: weights are loaded once,
before any timed call) and replaced by `DeviceTensor`s; each call's inputs arrive as descriptions
of storages the evaluator placed; forward runs under `DeviceMode`, so what it allocates is device
memory; the outputs go back as descriptions, never as bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from kegen.eval.errors import CandidateError
from lowering.backend.device_client import RemoteDevice
from lowering.backend.device_tensor import DeviceMode, DeviceTensor


def _convert(value: Any, device: RemoteDevice, seen: dict[int, DeviceTensor]) -> Any:
    if isinstance(value, DeviceTensor) or not isinstance(value, torch.Tensor):
        return value
    if value.device.type != "cpu" or value.is_sparse:
        return value
    key = id(value)
    if key not in seen:
        seen[key] = device.to_device(value.detach())
    return seen[key]


def model_to_device(model: Any, device: RemoteDevice) -> None:
    """Upload every tensor the model holds (parameters, buffers, tensor attributes) and put device
    tensors in their place (shared tensors stay shared)."""
    seen: dict[int, DeviceTensor] = {}
    modules = list(model.modules()) if isinstance(model, torch.nn.Module) else [model]
    for mod in modules:
        if isinstance(mod, torch.nn.Module):
            for name, p in list(mod._parameters.items()):
                if p is not None:  # still an nn.Parameter (isinstance), over device memory
                    mod._parameters[name] = torch.nn.Parameter(_convert(p, device, seen), requires_grad=False)
            for name, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[name] = _convert(b, device, seen)
        attrs = vars(mod)
        for name, v in list(attrs.items()):
            if isinstance(v, torch.Tensor) and not name.startswith("_"):
                attrs[name] = _convert(v, device, seen)


def device_inputs(metas: list[Any], device: RemoteDevice) -> list[Any]:
    """The call's inputs: device tensors for the storages the evaluator placed, plain scalars."""
    out: list[Any] = []
    for meta in metas:
        if not isinstance(meta, dict):
            raise CandidateError("runtime_error", "the evaluator sent a malformed input")
        out.append(meta["py"] if "py" in meta else device.tensor(meta))
    return out


def device_outputs(outs: list[Any], candidate: Path | None) -> list[dict[str, Any]]:
    """Descriptions of forward's outputs; a host tensor is refused (it cannot come from the inputs)."""
    metas = []
    for i, o in enumerate(outs):
        if not isinstance(o, DeviceTensor):
            raise CandidateError(
                "runtime_error",
                f"output {i} of forward is a host tensor ({type(o).__name__}): on mtia outputs are device "
                "tensors written by kernels (allocate them with torch.empty / torch.empty_like in forward)",
            )
        metas.append(o.describe())
    return metas


@contextlib.contextmanager
def on_device(device: RemoteDevice) -> Iterator[None]:
    """Run forward with tensor allocations on the device (see `DeviceMode`)."""
    with DeviceMode(device):
        yield
