"""Regenerate the stored profiles the golden prompt tests render (tests/search/golden/*.profile.json).

Runs a problem's candidate on the mtia Triton backend in this process (no evaluator), reads the
driver's launch records and builds the profile with `kegen.profiling.from_mtia_launches`. The
roofline is the evaluator's (inputs read once + outputs written once; FLOPs by FlopCounterMode);
see `kegen.profiling.local_run`.

    .venv/bin/python tools/profile_fixtures.py            # softmax and gemm seeds
    .venv/bin/python tools/profile_fixtures.py PROBLEM CANDIDATE OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "search" / "golden"
DEFAULTS = (
    ("kegen/examples/softmax/problem.py", "kegen/examples/softmax/seed.py", "softmax_seed.profile.json"),
    ("kegen/suites/default/gemm/problem.py", "kegen/suites/default/gemm/seed.py", "gemm_seed.profile.json"),
)


def profile_dict(problem: Path, candidate: Path, machine: str = "mtia-2i") -> dict[str, Any]:
    """The profile of one forward of `candidate` on `machine`, as stored in the graph store."""
    from kegen.profiling.local_run import run_candidate

    run = run_candidate(problem, candidate.read_text(), machine)
    if run.status != "ok" or run.profile is None:
        raise RuntimeError(f"{candidate}: {run.status}: {run.message}")
    return run.profile


def main(argv: list[str]) -> int:
    jobs = [tuple(argv[:3])] if len(argv) >= 3 else [(p, c, str(GOLDEN / o)) for p, c, o in DEFAULTS]
    for problem, candidate, out in jobs:
        data = profile_dict(ROOT / problem, ROOT / candidate)
        Path(out).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out}: {data['time_s'] * 1e6:.2f} us, bottleneck {data['bottleneck']['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
