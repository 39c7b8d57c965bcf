"""The agent's candidate runs: `kegen.eval.evaluate` in a worker process, never in kegen's own.

The agent's tools (compile to a stage, run for correctness, profile) go through the public
`kegen.eval` API, which runs the candidate in its sandboxed worker; this module runs that API in a
separate process (`ToolRunner`: one spawned worker, kept warm across calls) so that the search's
process imports no candidate and its threads never share the evaluator's state. Each run compiles
into a private Triton cache (`KEGEN_EVAL_CACHE_DIR`, read per evaluation), from which the compiled
stages (ttir, tile, llir, rvasm) are read back as text.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

STAGES = ("ttir", "tile", "llir", "rvasm")
MODES = ("compile", "run", "profile")
STAGE_CHARS = 60_000  # per stage file read back (the tool caps what it sends further)

ToolEval = Callable[[str, str, str, str, str, float], dict[str, Any]]


def evaluate_for_tool(
    problem: str, code: str, mode: str, target: str, machine: str, timeout_s: float
) -> dict[str, Any]:
    """One sandboxed evaluation of `code` for a tool, as plain data.

    `mode`: compile (one call: compile errors, the stages), run (correctness on the problem's inputs,
    one trial, no profile) or profile (eval + the full profile). Runs in the tool worker process.
    """
    if mode not in MODES:
        raise ValueError(f"unknown tool mode {mode!r}; choose one of {', '.join(MODES)}")
    from kegen.eval import EvalConfig, ProblemError, evaluate

    with tempfile.TemporaryDirectory(prefix="kegen-agent-") as tmp:
        os.environ["KEGEN_EVAL_CACHE_DIR"] = tmp
        config = EvalConfig(
            target=target, machine=machine, trials=1, timing_runs=1, timeout_s=max(timeout_s, 5.0),
            profile=mode == "profile", compile_baseline=False,
        )  # fmt: skip
        try:
            r = evaluate(problem, code, config=config, mode="run" if mode == "compile" else mode)
        except ProblemError as exc:
            return {"status": "problem_error", "message": str(exc)}
        out: dict[str, Any] = {
            "status": str(getattr(r.status, "value", r.status)),
            "message": r.message,
            "source_line": r.source_line,
            "max_abs_error": r.max_abs_error,
            "time_s": r.candidate_time_s,
        }
        if mode == "profile":
            out["profile"] = dict(r.profile or {})
        out["stages"] = _stages(Path(tmp)) if mode == "compile" else {}
    return out


def _stages(root: Path) -> dict[str, dict[str, str]]:
    """{kernel: {stage: text}} from a Triton cache directory."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*")):
        stage = path.suffix.lstrip(".")
        if stage in STAGES and path.is_file() and not path.name.startswith("__grp__"):
            text = path.read_text(encoding="utf-8", errors="replace")[:STAGE_CHARS]
            found.setdefault(path.stem, {})[stage] = text
    return found


class ToolRunner:
    """Runs `evaluate_for_tool` in one spawned worker process (started at the first call)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def __call__(
        self, problem: str, code: str, mode: str, target: str, machine: str, timeout_s: float
    ) -> dict[str, Any]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        fut = self._pool.submit(evaluate_for_tool, problem, code, mode, target, machine, timeout_s)
        try:
            return fut.result(timeout=timeout_s + 60.0)  # the worker's start and the evaluator's own time
        except FutureTimeout:
            self.close()
            return {"status": "timeout", "message": f"the tool's evaluation took over {timeout_s:.0f} s"}
        except Exception as exc:  # the worker died: the call fails, the next one starts another
            self.close()
            return {"status": "tool_error", "message": f"{type(exc).__name__}: {exc}"}

    def close(self) -> None:
        """Stop the worker (its evaluation, if any, is abandoned)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)
