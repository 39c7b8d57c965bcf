"""Helpers of the kegen.eval tests: fixture paths, target availability, a quick config."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, EvalResult, evaluate

FIXTURES = Path(__file__).parent / "fixtures"


def problem(name: str) -> Path:
    return FIXTURES / "problems" / f"{name}.py"


def candidate(name: str) -> Path:
    return FIXTURES / "candidates" / f"{name}.py"


@functools.cache
def mtia_unavailable_reason() -> str | None:
    """None when kernel[grid](cpu_tensors) runs on the simulated MTIA in this environment."""
    import subprocess
    import sys

    code = "from kegen.eval.timing_mtia import backend_status; print(backend_status() or 'OK')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    text = (out.stdout.strip().splitlines() or ["?"])[-1]
    return None if text == "OK" else f"mtia backend not usable here: {text or out.stderr[-300:]}"


def needs_mtia() -> pytest.MarkDecorator:
    reason = mtia_unavailable_reason()
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def quick(target: str = "mtia", **kw: object) -> EvalConfig:
    """A cheap configuration: 2 trials, one timing run, no profile, a short timeout."""
    base: dict[str, object] = {
        "target": target,
        "trials": 2,
        "timing_runs": 1,
        "rep_ms": 5.0,
        "profile": False,
        "timeout_s": 120.0,
    }
    base.update(kw)
    return EvalConfig(**base)  # type: ignore[arg-type]


def run_eval(prob: str, cand: str, config: EvalConfig, **kw: object) -> EvalResult:
    return evaluate(problem(prob), candidate(cand), config=config, **kw)  # type: ignore[arg-type]


def small_jagged(tmp_path: Path) -> tuple[Path, Path]:
    """The production jagged_sum_fp32 problem at 64 segments of up to 64 rows (its draws differ in
    rows, so in work), written under `tmp_path`, and its seed: (problem, seed)."""
    from kegen.suites import find_suite

    p = find_suite("production").select(["jagged_sum_fp32"]).problems[0]
    path = tmp_path / "problem.py"
    path.write_text(p.problem_path.read_text() + "\n\nNUM_SEGMENTS = 64\nMAX_LEN = 64\n")
    seed = tmp_path / "seed.py"
    seed.write_text(p.seed_path.read_text())
    return path, seed
