"""Checking a drafted candidate as GPU code: Triton's interpreter in a fresh process (gpu_interp.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HELPER = Path(__file__).with_name("gpu_interp.py")


def assert_matches_in_interpreter(problem: Path, source: str, tmp: Path, atol: str = "2e-2") -> None:
    """ModelNew of `source` against the problem's Model, run by Triton's interpreter (TRITON_INTERPRET=1
    must be set before Triton is first imported, hence the subprocess)."""
    candidate = tmp / "candidate.py"
    candidate.write_text(source)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    got = subprocess.run(
        [sys.executable, str(HELPER), "check", str(problem), str(candidate), atol],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0 and got.stdout.strip().endswith("ok"), got.stderr[-3000:]
