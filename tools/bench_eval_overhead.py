"""Wall time of `kegen eval` with the trusted design vs the old in-process harness, in one run.

    .venv/bin/python tools/bench_eval_overhead.py [--old-commit 9fa55f4] [--runs 5] [--json out.json]

The old harness is checked out read-only with `git worktree add --detach` (never stash/reset) into
a temporary directory, with the *current* `mtia_sim/` and `lowering/` copied over it, so that both
sides simulate with the same simulator and compiler and only the evaluation differs. Each run is a
fresh `kegen eval PROBLEM SEED --target mtia --json` process (what a user or a script pays: zygote
start, compiles, trials, timing, profile); old and new alternate. Prints medians, the ratio and the
simulated times each side reported, and writes JSON. Wall time depends on the machine's load;
the CPU time of the whole process tree (evaluator, sandbox, zygote, workers) much less so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "9fa55f4"  # the last commit with the in-process harness (kegen/eval/harness.py)
PROBLEM = "kegen/examples/softmax/problem.py"
SEED = "kegen/examples/softmax/seed.py"


def old_tree(commit: str, into: Path) -> Path:
    """A read-only-use worktree of `commit` with the current simulator and compiler over it."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), commit],
        check=True,
        capture_output=True,
    )
    for part in ("mtia_sim", "lowering"):
        shutil.rmtree(into / part)
        shutil.copytree(ROOT / part, into / part, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def _become_subreaper() -> None:
    """Orphans of a run (a zygote its evaluator killed without waiting) are re-parented here and
    reaped, so that their CPU time is counted too."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap() -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _children_cpu() -> float:
    _reap()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def one_eval(tree: Path) -> tuple[float, float, dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        "-c",
        "import sys; from kegen.cli import main; sys.exit(main())",
        "eval",
        str(tree / PROBLEM),
        str(tree / SEED),
        "--target",
        "mtia",
        "--json",
    ]
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        data = {"status": "no-json", "stderr": proc.stderr[-500:]}
    return wall, cpu, data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-commit", default=OLD_COMMIT)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args()
    _become_subreaper()
    tmp = Path(tempfile.mkdtemp(prefix="kegen-old-eval-"))
    old = old_tree(args.old_commit, tmp / "old")
    try:
        rows: dict[str, list[float]] = {"old": [], "new": []}
        cpus: dict[str, list[float]] = {"old": [], "new": []}
        sim: dict[str, Any] = {}
        status: dict[str, Any] = {}
        for i in range(args.runs):
            for name, tree in (("old", old), ("new", ROOT)):
                wall, cpu, data = one_eval(tree)
                rows[name].append(wall)
                cpus[name].append(cpu)
                sim[name] = data.get("candidate_time_s")
                status[name] = data.get("status")
                print(
                    f"run {i + 1} {name}: {wall:.2f} s  status {data.get('status')}  "
                    f"simulated {data.get('candidate_time_s')}",
                    flush=True,
                )
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True
        )
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    out = {
        "problem": PROBLEM,
        "candidate": SEED,
        "old_commit": args.old_commit,
        "runs": args.runs,
        "wall_s": rows,
        "median_s": med,
        "ratio_new_over_old": med["new"] / med["old"],
        "cpu_s": cpus,
        "median_cpu_s": med_cpu,
        "cpu_ratio_new_over_old": med_cpu["new"] / med_cpu["old"],
        "simulated_time_s": sim,
        "status": status,
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
