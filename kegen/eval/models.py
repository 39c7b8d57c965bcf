"""Building and calling models, on either side: the reference in the evaluator, the candidate in
its worker (seeded construction, so both get equal weights; outputs flattened to a tensor list)."""

from __future__ import annotations

from typing import Any

import torch

from kegen.eval.inputs import default_device, flatten_outputs


def build_model(cls: type, init_inputs: list[Any], seed: int, device: str) -> torch.nn.Module:
    """`cls(*init_inputs)` with the RNG seeded, so the reference and the candidate get equal weights."""
    torch.manual_seed(seed)
    with default_device(device):
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


def call_reference(model: Any, inputs: list[Any], gpu: bool) -> list[torch.Tensor]:
    with torch.no_grad(), default_device("cuda" if gpu else "cpu"):
        out = flatten_outputs(model(*inputs))
    if gpu:
        torch.cuda.synchronize()
    return out
