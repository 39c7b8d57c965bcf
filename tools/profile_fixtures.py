"""Regenerate the stored profiles the golden prompt tests render (tests/search/golden/*.profile.json).

Runs a problem's candidate on the mtia Triton backend in this process (no evaluator), reads the
driver's launch records and builds the profile with `kegen.profiling.from_mtia_launches`. The
roofline is the evaluator's (inputs read once + outputs written once; FLOPs by FlopCounterMode).

    .venv/bin/python tools/profile_fixtures.py            # softmax and gemm seeds
    .venv/bin/python tools/profile_fixtures.py PROBLEM CANDIDATE OUT.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "search" / "golden"
DEFAULTS = (
    ("kegen/examples/softmax/problem.py", "kegen/examples/softmax/seed.py", "softmax_seed.profile.json"),
    ("kegen/suites/default/gemm/problem.py", "kegen/suites/default/gemm/seed.py", "gemm_seed.profile.json"),
)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def profile_dict(problem: Path, candidate: Path, machine: str = "mtia-2i") -> dict[str, Any]:
    """The profile of one forward of `candidate` on `machine`, as stored in the graph store."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from kegen.profiling import from_mtia_launches
    from lowering.backend import driver
    from mtia_sim.machine import load_machine

    prob, cand = _load(problem, "fixture_problem"), _load(candidate, "fixture_candidate")
    torch.manual_seed(0)
    inputs = prob.get_inputs()
    ref_model = prob.Model(*prob.get_init_inputs())
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        ref = ref_model(*inputs)
    model = cand.ModelNew(*prob.get_init_inputs())
    model(*inputs)  # compile
    driver.clear_launch_history()
    model(*inputs)
    m = load_machine(machine)
    nbytes = sum(t.numel() * t.element_size() for t in inputs) + ref.numel() * ref.element_size()
    flops = int(counter.get_total_flops())
    mem_s, math_s = nbytes / m.dram_bw, flops / m.peak_flops("fp32")
    launches = driver.launch_history()
    total = sum(float(r.result.seconds) for r in launches)
    roofline = {
        "bytes": nbytes,
        "flops": flops,
        "time_s": max(mem_s, math_s),
        "bound": "memory" if mem_s >= math_s else "compute",
        "fraction": max(mem_s, math_s) / total if total else None,
    }
    return from_mtia_launches(launches, machine, roofline).to_dict()


def main(argv: list[str]) -> int:
    jobs = [tuple(argv[:3])] if len(argv) >= 3 else [(p, c, str(GOLDEN / o)) for p, c, o in DEFAULTS]
    for problem, candidate, out in jobs:
        data = profile_dict(ROOT / problem, ROOT / candidate)
        Path(out).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out}: {data['time_s'] * 1e6:.2f} us, bottleneck {data['bottleneck']['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
