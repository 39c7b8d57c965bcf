"""Run by tests/search/test_gpu_templates.py in a subprocess started with TRITON_INTERPRET=1 (the
interpreter must be on before Triton is first imported): `python gpu_interp.py MODE PROBLEM CANDIDATE ATOL`.

Modes: `check` (ModelNew against the problem's Model, equal seeded construction and inputs, both in
eval mode; PROBLEM is a production suite problem's name or a problem file's path),
`repack` (the same after both models' conv weights change in place), `causal` (the candidate
against a causal softmax attention; PROBLEM is ignored), `ramp` (an attention whose scores grow
along every row, up to 2^46 beyond the first key block's max; PROBLEM is ignored). Exits non-zero with the mismatch."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

SUITE = Path(__file__).resolve().parents[2] / "kegen" / "suites" / "production"


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pair(problem: str, candidate: Path) -> tuple[ModuleType, Any, Any]:
    path = Path(problem) if problem.endswith(".py") else SUITE / problem / "problem.py"
    prob = _module(path, "problem")
    cand = _module(candidate, "candidate")
    torch.manual_seed(0)
    ref = prob.Model(*prob.get_init_inputs()).eval()
    torch.manual_seed(0)
    new = cand.ModelNew(*prob.get_init_inputs()).eval()
    return prob, ref, new


def check(problem: str, candidate: Path, atol: float, repack: bool = False) -> None:
    prob, ref, new = _pair(problem, candidate)
    torch.manual_seed(1)
    inputs = prob.get_inputs()
    with torch.no_grad():
        if repack:
            new(*inputs)  # packs the weights once
            for m in (ref, new):
                m.conv.weight.mul_(-0.5)
        want, got = ref(*inputs), new(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=2e-2)


def causal(candidate: Path, atol: float) -> None:
    mod = _module(candidate, "candidate")
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 48, 64, dtype=torch.float16) for _ in range(3))
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(64)
    s = s.masked_fill(torch.ones(48, 48, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(s, -1) @ v.float()
    with torch.no_grad():
        got = mod.ModelNew()(q, k, v).float()
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-2)


def ramp(candidate: Path, atol: float) -> None:
    mod = _module(candidate, "candidate")
    torch.manual_seed(1)
    q = torch.ones(1, 2, 96, 64, dtype=torch.float16)
    k = torch.linspace(0.0, 6.0, 96)[:, None].expand(1, 2, 96, 64).contiguous().half()
    v = torch.randn(1, 2, 96, 64, dtype=torch.float16)
    want = torch.softmax((q.float() @ k.float().transpose(-2, -1)) / 8.0, -1) @ v.float()
    with torch.no_grad():
        got = mod.ModelNew()(q, k, v).float()
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-2)


if __name__ == "__main__":
    mode, problem, path, tol = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    if mode == "causal":
        causal(path, tol)
    elif mode == "ramp":
        ramp(path, tol)
    else:
        check(problem, path, tol, repack=mode == "repack")
    print("ok")
