"""`evaluate(problem, candidate, ...)`: the public entry of kegen.eval."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from kegen.eval.config import EvalConfig
from kegen.eval.errors import ProblemError
from kegen.eval.result import EvalResult, Status


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
    from kegen.eval.trusted import sandbox

    if not config.fresh_process:  # the sandbox boots (torch, Triton) while this process imports its own
        sandbox.prestart(sandbox.worker_env(config.target))
    from kegen.eval.trusted.evaluator import Evaluator  # torch, Triton (imported here, on this thread)

    _warm_imports()

    with tempfile.TemporaryDirectory(prefix="kegen-cand-") as tmp:
        cand_path = _as_path(candidate, Path(tmp), "candidate")
        base_path = _as_path(baseline, Path(tmp), "baseline") if baseline is not None else None
        data = Evaluator(problem_path, cand_path, base_path, config, mode).run()
    if data.get("problem_error"):
        raise ProblemError(data["problem_error"])
    result = EvalResult.from_dict(data)
    result.wall_time_s = time.monotonic() - started
    result.target = config.target
    if not result.machine and config.target == "mtia":
        result.machine = config.machine
    if result.status != Status.OK:
        result.fitness = 0.0
    return result


# Imported on a background thread once the evaluator's own imports (torch, Triton) are done: they
# are needed only later (the roofline's FlopCounterMode imports torch._dynamo lazily: seconds).
_WARM = ("torch.utils.flop_counter", "torch._dynamo")
_warmed = False


def _warm_imports() -> None:
    """Import what the evaluator needs later on a background thread, while it waits for the
    sandboxed worker. Only modules whose dependencies are already imported (no import races)."""
    global _warmed
    if _warmed:
        return
    _warmed = True

    def run() -> None:
        import importlib

        for name in _WARM:
            try:
                importlib.import_module(name)
            except Exception:  # optional; the roofline imports what it needs itself
                pass

    threading.Thread(target=run, name="kegen-eval-warm-imports", daemon=True).start()
