"""Check a suite problem's seed against its reference with Triton's CPU interpreter.

This needs no backend: `TRITON_INTERPRET=1` makes `@triton.jit` kernels run in numpy. It is how
the suite's seeds are validated while (or where) the simulated MTIA target is unavailable, and
what `tests/bench/test_suite_seeds.py` runs. Models are built as KernelBench does: the same torch
seed before constructing `Model` and `ModelNew`, so parameters match.

Interpreter mode must be on before Triton is first imported (Triton's own library functions are
decorated at import), and must not leak into a process that compiles for real: `check_problems`
therefore runs the checks in a child process (`python -m kegen.suites.interpreter`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kegen.eval.config import DEFAULT_TOLERANCES as TOLERANCES  # (atol, rtol) by dtype, as kegen eval
from kegen.modules import load_module_from_file, unique_module_name
from kegen.suites import SuiteProblem, find_suite
from lowering.triton_interpreter import patch_scalar_index


@dataclass(frozen=True)
class InterpreterCheck:
    """Outcome of running one seed under the interpreter."""

    name: str
    ok: bool
    max_abs_error: float
    message: str
    wall_s: float


def _require_interpret_mode() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("check_seed runs kernels with Triton's interpreter: set TRITON_INTERPRET=1 before "
                           "Triton is imported, or call check_problems(), which starts such a process")


def _load(path: Path, prefix: str) -> ModuleType:
    name = unique_module_name(path, f"kegen_suite_{prefix}_{path.parent.name}")
    return load_module_from_file(path, name, wrap_errors=False)  # Triton reads kernel source via inspect


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, tuple | list) else (x,)


def _compare(ref: Any, out: Any) -> tuple[bool, float, str]:
    import torch

    refs, outs = _as_tuple(ref), _as_tuple(out)
    if len(refs) != len(outs):
        return False, float("inf"), f"{len(outs)} outputs, the reference gives {len(refs)}"
    worst = 0.0
    for i, (r, o) in enumerate(zip(refs, outs, strict=True)):
        if not isinstance(o, torch.Tensor) or r.shape != o.shape or r.dtype != o.dtype:
            got = f"{tuple(o.shape)} {o.dtype}" if isinstance(o, torch.Tensor) else type(o).__name__
            return False, float("inf"), f"output {i}: got {got}, expected {tuple(r.shape)} {r.dtype}"
        err = float((r.double() - o.double()).abs().max()) if r.numel() else 0.0
        worst = max(worst, err)
        atol, rtol = TOLERANCES.get(str(r.dtype).removeprefix("torch."), TOLERANCES["float32"])
        if not torch.allclose(r.double(), o.double(), atol=atol, rtol=rtol, equal_nan=False):
            return False, worst, f"output {i}: max abs error {err:.3g} beyond atol={atol}, rtol={rtol}"
    return True, worst, ""


SIZE_MODES = ("all", "default", "edge")


def check_seed(problem: SuiteProblem, seed: int = 0, sizes_mode: str = "all") -> InterpreterCheck:
    """Run `problem`'s seed under the interpreter and compare with Model at the problem's sizes and/or
    at the odd edge sizes `kegen eval` also tries (EDGE_SIZES, else its automatic set).

    `sizes_mode`: "all" (both), "default" or "edge" (the edge sizes only; the problem's own sizes
    where it has none)."""
    import torch

    from kegen.eval.inputs import InputFactory
    from kegen.eval.loader import load_problem

    _require_interpret_mode()
    start = time.perf_counter()
    patch_scalar_index()
    ref = load_problem(problem.problem_path)
    seed_mod = _load(problem.seed_path, "seed")
    factory = InputFactory(ref, "cpu")
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    model = ref.model_cls(*init)
    torch.manual_seed(seed)
    candidate = seed_mod.ModelNew(*init)
    if sizes_mode not in SIZE_MODES:
        raise ValueError(f"sizes_mode must be one of {', '.join(SIZE_MODES)}, got {sizes_mode!r}")
    edges = factory.edge_sizes() if sizes_mode != "default" else []
    size_sets: list[dict[str, int]] = ([{}] if sizes_mode != "edge" or not edges else []) + edges
    worst = 0.0
    for sizes in size_sets:
        where = f" at sizes {sizes}" if sizes else ""
        with torch.no_grad():
            try:
                expected = model(*factory.make(seed + 1, sizes))
            except Exception:  # the reference does not allow these sizes: nothing to check
                continue
            try:
                out = candidate(*factory.make(seed + 1, sizes))
            except Exception as exc:  # a failing seed is a result to report, not a crash
                message = f"{type(exc).__name__}{where}: {exc}"
                elapsed = time.perf_counter() - start
                return InterpreterCheck(problem.name, False, float("inf"), message, elapsed)
        ok, err, msg = _compare(expected, out)
        worst = max(worst, err)
        if not ok:
            return InterpreterCheck(problem.name, False, worst, msg + where, time.perf_counter() - start)
    return InterpreterCheck(problem.name, True, worst, "", time.perf_counter() - start)


def check_problems(suite_root: Path, names: list[str] | None = None, seed: int = 0, sizes_mode: str = "all",
                   timeout_s: float = 600.0) -> list[InterpreterCheck]:
    """Check the seeds of a suite folder in a child process with TRITON_INTERPRET=1."""
    # problem names right after the suite: argparse takes no positionals after the options
    cmd = [sys.executable, "-m", "kegen.suites.interpreter", str(suite_root), *(names or []),
           "--seed", str(seed), "--sizes", sizes_mode]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    results = [InterpreterCheck(**json.loads(line)) for line in lines]
    if proc.returncode != 0 and not results:
        raise RuntimeError(f"interpreter check of {suite_root} failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")
    return results


def main(argv: list[str] | None = None) -> int:
    """`python -m kegen.suites.interpreter SUITE [PROBLEM...]`: one JSON line per problem."""
    parser = argparse.ArgumentParser(description="check suite seeds with Triton's CPU interpreter")
    parser.add_argument("suite", help="suite name or folder")
    parser.add_argument("problems", nargs="*", help="only these problems")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", choices=SIZE_MODES, default="all",
                        help="check at the problem's sizes, at kegen eval's edge sizes, or both (default)")
    args = parser.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"
    failed = 0
    for problem in find_suite(args.suite).select(args.problems).problems:
        result = check_seed(problem, seed=args.seed, sizes_mode=args.sizes)
        failed += not result.ok
        data = asdict(result)
        data["max_abs_error"] = data["max_abs_error"] if data["max_abs_error"] != float("inf") else 1e308
        print(json.dumps(data), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
