"""What the package asks of an environment: no upper bound on Python, torch as a range (an
installed CUDA torch stays), the simulator's dependencies only in the `mtia` extra, and kegen's
nvidia/amd side importable without them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
SIM_DEPS = ("unicorn", "llvmlite", "lark", "pyelftools", "ml_dtypes")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_metadata_fits_existing_environments():
    project = _project()
    assert "<" not in project["requires-python"]
    reqs = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    torch = reqs["torch"].specifier
    assert not any(s.operator in ("==", "===") for s in torch)
    assert torch.contains("2.11.0") and torch.contains("2.13.0+cu130") and torch.contains("2.14.1")
    triton = reqs["triton"].specifier
    assert triton.contains("3.6.0") and triton.contains("3.7.1") and triton.contains("3.8.0")
    assert not set(SIM_DEPS) & set(reqs), "simulator dependencies belong in the mtia extra"
    extras = project["optional-dependencies"]
    assert {Requirement(r).name for r in extras["mtia"]} == set(SIM_DEPS)
    assert [Requirement(r).name for r in extras["ray"]] == ["ray"]


BLOCKED_IMPORTS = """
import importlib.abc, sys
BLOCK = {"unicorn", "llvmlite", "lark", "elftools", "ml_dtypes"}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ImportError(f"{name} is not installed (blocked by the test)")
sys.meta_path.insert(0, Blocker())
import triton
from triton.backends import backends
assert {"nvidia", "amd"} <= set(backends), sorted(backends)
import kegen.bench.runner, kegen.cli, kegen.eval, kegen.executor, kegen.search.loop
from kegen.cli import main
assert main(["evolve", "--help"]) == 0
"""


def test_gpu_side_imports_without_the_simulator():
    proc = subprocess.run([sys.executable, "-c", BLOCKED_IMPORTS], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
