"""Run a knowledge-base code sample and check it against its PyTorch reference.

A code sample is one Python file in KernelBench form: `Model` (the PyTorch reference),
`ModelNew` (the same computation through `@triton.jit` kernels), `get_inputs()` and
`get_init_inputs()`. A learned sample keeps `ModelNew` in `NAME.py` and the problem
(`Model`, `get_inputs`, `get_init_inputs`) beside it in `NAME.problem.py`. An optional
module constant `TOLERANCE = (atol, rtol)` overrides the default comparison tolerance.

Modes: `mtia` runs the kernels on the simulator through kegen's Triton backend (the active
driver on a machine without a GPU); `interpret` runs them in Triton's interpreter
(TRITON_INTERPRET=1, numpy on the CPU).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kegen.modules import load_module_from_file, unique_module_name

MODES = ("mtia", "interpret")
DEFAULT_TOLERANCE = (1e-4, 1e-4)
PROBLEM_SUFFIX = ".problem.py"


class SampleError(RuntimeError):
    """A sample that cannot be loaded or run (the message says which part is missing or failed)."""


@dataclass(frozen=True)
class SampleCheck:
    """The outcome of one sample run: `ok` when every output matched the reference."""

    path: str
    mode: str
    ok: bool
    max_abs_err: float
    detail: str


def _import(path: Path) -> ModuleType:
    if path.suffix != ".py":
        raise SampleError(f"cannot import {path}: not a Python file")
    name = unique_module_name(path, "kegen_kb_sample")
    return load_module_from_file(path, name, register=False, wrap_errors=False)


def problem_file(sample: Path) -> Path | None:
    """The companion `NAME.problem.py` of a learned sample, if there is one."""
    companion = sample.with_name(sample.name[: -len(".py")] + PROBLEM_SUFFIX)
    return companion if companion.is_file() else None


def current_mode() -> str:
    """The mode kernels launch in within this process (Triton fixes it when it is first imported)."""
    from triton import knobs

    return "interpret" if knobs.runtime.interpret else "mtia"


def load_sample(path: Path) -> tuple[ModuleType, ModuleType]:
    """(module with ModelNew, module with Model/get_inputs/get_init_inputs)."""
    sample = _import(path)
    companion = problem_file(path)
    problem = _import(companion) if companion is not None else sample
    for module, names in ((sample, ("ModelNew",)), (problem, ("Model", "get_inputs", "get_init_inputs"))):
        missing = [n for n in names if not hasattr(module, n)]
        if missing:
            raise SampleError(
                f"{module.__file__}: missing {', '.join(missing)} (a code sample is in KernelBench "
                "form: Model, ModelNew, get_inputs, get_init_inputs)"
            )
    return sample, problem


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def check_sample(path: Path, *, seed: int = 0) -> SampleCheck:
    """Run `ModelNew` and `Model` in this process on the same seeded inputs; compare every output.

    Kernels run in this process's mode (`current_mode()`); `check_samples` picks the mode.
    """
    import torch

    mode = current_mode()
    try:
        sample, problem = load_sample(path)
    except SampleError as exc:
        return SampleCheck(str(path), mode, False, float("inf"), str(exc))
    atol, rtol = getattr(sample, "TOLERANCE", DEFAULT_TOLERANCE)
    torch.manual_seed(seed)
    init = problem.get_init_inputs()
    inputs = problem.get_inputs()
    torch.manual_seed(seed)
    ref_model = problem.Model(*init)
    torch.manual_seed(seed)
    new_model = sample.ModelNew(*init)
    with torch.no_grad():
        expected = _outputs(ref_model(*[x.clone() if torch.is_tensor(x) else x for x in inputs]))
        try:
            got = _outputs(new_model(*[x.clone() if torch.is_tensor(x) else x for x in inputs]))
        except Exception as exc:  # a failing kernel is a result to report, not a crash of the checker
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return SampleCheck(
                str(path), mode, False, float("inf"), f"ModelNew raised {type(exc).__name__}: {first}"
            )
    if len(expected) != len(got):
        return SampleCheck(
            str(path),
            mode,
            False,
            float("inf"),
            f"ModelNew returned {len(got)} outputs, Model {len(expected)}",
        )
    worst = 0.0
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if tuple(e.shape) != tuple(g.shape) or e.dtype != g.dtype:
            return SampleCheck(
                str(path),
                mode,
                False,
                float("inf"),
                f"output {i}: got {tuple(g.shape)} {g.dtype}, expected {tuple(e.shape)} {e.dtype}",
            )
        diff = (g.double() - e.double()).abs()
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        if not torch.allclose(g.double(), e.double(), atol=atol, rtol=rtol):
            return SampleCheck(
                str(path),
                mode,
                False,
                worst,
                f"output {i} differs from the reference (max abs error {worst:.3g}, "
                f"atol={atol}, rtol={rtol})",
            )
    return SampleCheck(
        str(path), mode, True, worst, f"{len(got)} output(s) match (max abs error {worst:.3g})"
    )


def check_samples(paths: list[Path], *, mode: str, timeout_s: float = 600.0) -> list[SampleCheck]:
    """Check samples in a fresh Python process launching kernels in `mode` (mtia or interpret).

    A separate process because Triton fixes interpreter mode when it is first imported, and so a
    crashing kernel cannot take the caller down.
    """
    if mode not in MODES:
        raise SampleError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    env = dict(os.environ, TRITON_INTERPRET="1" if mode == "interpret" else "0")
    cmd = [sys.executable, "-m", "kegen.knowledge.samples", *[str(p) for p in paths]]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return [
            SampleCheck(str(p), mode, False, float("inf"), f"timed out after {timeout_s:g} s") for p in paths
        ]
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
            results[data["path"]] = SampleCheck(**data)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return [
        results.get(
            str(p),
            SampleCheck(
                str(p), mode, False, float("inf"), f"checker process exited {proc.returncode}: {tail}"
            ),
        )
        for p in paths
    ]


def patch_interpreter_scalar_index() -> None:
    """Let Triton 3.6's interpreter use runtime ints in `range()` under NumPy 2
    (`lowering.triton_interpreter.patch_scalar_index`)."""
    from lowering.triton_interpreter import patch_scalar_index

    patch_scalar_index()


def main(argv: list[str] | None = None) -> int:
    """`python -m kegen.knowledge.samples PATH...`: one JSON line per sample; exit 1 if any failed."""
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if current_mode() == "interpret":
        patch_interpreter_scalar_index()
    ok = True
    for path in paths:
        result = check_sample(path)
        ok &= result.ok
        print(json.dumps(dataclasses.asdict(result)), flush=True)
    return 0 if ok else 1


def probe_mode() -> tuple[str, str]:
    """(mode to verify samples in, why): `mtia` when the simulator runs the vector-add sample correctly,
    else `interpret` with the reason the simulator cannot be used."""
    reason = mtia_unavailable_reason()
    if reason is None:
        from kegen.knowledge.store import shipped_root

        probe = shipped_root() / "code_samples" / "vector_add.py"
        result = check_samples([probe], mode="mtia")[0]
        if result.ok:
            return "mtia", "the mtia backend runs kernels on the simulator"
        reason = f"the mtia backend cannot run the vector-add sample yet: {result.detail}"
    return "interpret", reason


def mtia_unavailable_reason() -> str | None:
    """None when `kernel[grid](cpu tensors)` can reach the mtia backend; otherwise why not."""
    try:
        # Triton first: it discovers backends (ours included) through its entry points when imported
        from triton.backends import backends
    except Exception as exc:  # any failure here means no backend is usable in this environment
        return f"Triton's backends do not load: {type(exc).__name__}: {exc}"
    if "mtia" not in backends:
        found = ", ".join(sorted(backends)) or "none"
        return f"Triton found no mtia backend (found: {found}); is kegen installed?"
    try:
        if not backends["mtia"].driver.is_active():
            return "the mtia driver is not active on this machine (a GPU driver owns kernel launches)"
    except Exception as exc:
        return f"the mtia driver failed: {type(exc).__name__}: {exc}"
    return None


if __name__ == "__main__":
    sys.exit(main())
