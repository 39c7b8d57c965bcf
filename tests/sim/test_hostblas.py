"""numpy's OpenBLAS runs single-threaded under the simulator unless the environment says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mtia_sim.hostblas import blas_threads

PROBE = "from mtia_sim import Simulator; from mtia_sim.hostblas import blas_threads; Simulator(); print(blas_threads())"


@pytest.mark.skipif(blas_threads() is None, reason="numpy is not linked to OpenBLAS here")
@pytest.mark.parametrize(("extra", "want"), [({}, "1"), ({"KEGEN_SIM_BLAS_THREADS": "3"}, "3")])
def test_simulator_limits_numpy_blas_threads(extra: dict[str, str], want: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**env, **extra}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == want
