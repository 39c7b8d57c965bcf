"""`evaluate(problem, candidate, ...)`: the public entry of kegen.eval."""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from kegen.eval.config import EvalConfig
from kegen.eval.errors import ProblemError
from kegen.eval.result import EvalResult, Status
from kegen.eval.sandbox import WorkerOutcome, run_worker

GPU_TARGETS = ("nvidia", "amd")


def _as_path(candidate: str | Path, tmpdir: Path, name: str) -> Path:
    """A path stays a path; source text is written to a file (Triton needs kernels' source files)."""
    if isinstance(candidate, Path):
        return candidate.resolve()
    if "\n" not in candidate and candidate.endswith(".py") and Path(candidate).exists():
        return Path(candidate).resolve()
    if "\n" not in candidate and candidate.endswith(".py"):
        raise FileNotFoundError(f"candidate file {candidate} does not exist")
    path = tmpdir / f"{name}.py"
    path.write_text(candidate)
    return path


def evaluate(
    problem: str | Path,
    candidate: str | Path,
    *,
    baseline: str | Path | None = None,
    config: EvalConfig = EvalConfig(),
    mode: str = "eval",
) -> EvalResult:
    """Check, time and profile `candidate` against `problem`'s PyTorch reference.

    `candidate` (and `baseline`) may be a path or the source text itself. Runs in a sandboxed
    worker process; every failure of the candidate is a Status with fitness 0. Raises ProblemError
    if the problem file itself is broken. `mode` is "eval", "run" (one call, outputs summary) or
    "profile" (eval + full profile).
    """
    problem_path = Path(problem).resolve()
    if not problem_path.is_file():
        raise ProblemError(f"problem file {problem_path} does not exist")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kegen-cand-") as tmp:
        cand_path = _as_path(candidate, Path(tmp), "candidate")
        base_path = _as_path(baseline, Path(tmp), "baseline") if baseline is not None else None
        request: dict[str, Any] = {
            "mode": mode,
            "problem": str(problem_path),
            "candidate": str(cand_path),
            "baseline": str(base_path) if base_path else None,
            "config": config.to_dict(),
        }
        outcome = run_worker(
            request,
            timeout_s=config.timeout_s,
            memory_limit_mb=config.memory_limit_mb,
            gpu=config.target in GPU_TARGETS,
            env_overrides=_target_env(config),
            fresh_process=config.fresh_process,
        )
    result = _to_result(outcome, config)
    result.wall_time_s = time.monotonic() - started
    result.target = config.target
    if not result.machine and config.target == "mtia":
        result.machine = config.machine
    if result.status != Status.OK:
        result.fitness = 0.0
    return result


def _target_env(config: EvalConfig) -> dict[str, str]:
    """Target cpu runs Triton kernels in Triton's CPU interpreter."""
    return {"TRITON_INTERPRET": "1"} if config.target == "cpu" else {}


def _to_result(outcome: WorkerOutcome, config: EvalConfig) -> EvalResult:
    if outcome.timed_out:
        return EvalResult.failure(
            Status.TIMEOUT,
            f"candidate did not finish within {config.timeout_s:g} s (wall clock); the worker was killed",
        )
    if outcome.out_of_memory:
        return EvalResult.failure(
            Status.RUNTIME_ERROR,
            f"candidate exceeded the memory limit of {config.memory_limit_mb} MB; the worker was killed",
        )
    data = outcome.result
    if data is None:
        return EvalResult.failure(
            Status.RUNTIME_ERROR,
            _death_message(outcome),
            details={"stderr_tail": outcome.stderr_tail[-2000:]},
        )
    if data.get("problem_error"):
        raise ProblemError(data["problem_error"])
    return EvalResult.from_dict(data)


def _death_message(outcome: WorkerOutcome) -> str:
    rc = outcome.returncode
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        why = f"the worker was killed by {name}"
        if name == "SIGXCPU":
            why += " (CPU time limit)"
    else:
        why = f"the worker exited with code {rc} without a result"
    last = [ln for ln in outcome.stderr_tail.strip().splitlines() if ln.strip()][-1:]
    if any(s in outcome.stderr_tail for s in ("MemoryError", "Cannot allocate memory", "std::bad_alloc")):
        why += " (out of memory: over the memory limit?)"
    return why + (f"; last output: {last[0]}" if last else "")
