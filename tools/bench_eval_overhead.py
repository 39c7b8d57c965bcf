"""Wall time of `kegen eval` and of a search per evaluation, on the current tree (medians, JSON).

    .venv/bin/python tools/bench_eval_overhead.py [--runs 3] [--search-runs 3] [--json out.json]
    .venv/bin/python tools/bench_eval_overhead.py --old-commit 9fa55f4   # vs the old in-process harness

Each eval run is a fresh `kegen eval PROBLEM SEED --target mtia --json` process (what a user or a
script pays: zygote start, compiles, trials, timing, profile); each search run a fresh
`kegen evolve PROBLEM --seed SEED --budget 4 --jobs 1` with its own database, reported as its wall
time divided by the evaluations it made. With `--old-commit` the old harness is checked out
read-only with `git worktree add --detach` (never stash/reset) into a temporary directory, with the
*current* `mtia_sim/` and `lowering/` copied over it, and old and new runs (evals, then searches)
alternate: the fair comparison on a loaded machine.
Wall time depends on the machine's load; the CPU time of the whole process tree (evaluator,
sandbox, zygote, workers) much less so.
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


def one_search(tree: Path, tmp: Path, budget: int) -> tuple[float, float, dict[str, Any]]:
    """A fresh `kegen evolve` of the problem from its seed: (wall, CPU of the tree, run.json)."""
    out = Path(tempfile.mkdtemp(prefix="search-", dir=tmp))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        "-c",
        "import sys; from kegen.cli import main; sys.exit(main())",
        "evolve",
        str(tree / PROBLEM),
        "--seed",
        str(tree / SEED),
        "--budget",
        str(budget),
        "--jobs",
        "1",
        "--db",
        str(out / "search.db"),
        "--out",
        str(out / "run"),
        "--no-progress",
    ]
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    try:
        data = json.loads((out / "run" / "run.json").read_text())
    except (OSError, json.JSONDecodeError):
        data = {"evaluations": 0, "stderr": proc.stderr[-500:]}
    return wall, cpu, data


def bench_current(runs: int, search_runs: int, budget: int) -> dict[str, Any]:
    """Medians of `kegen eval` and of a search's wall per evaluation on this tree."""
    walls: list[float] = []
    cpus: list[float] = []
    statuses: list[Any] = []
    for i in range(runs):
        wall, cpu, data = one_eval(ROOT)
        walls.append(wall)
        cpus.append(cpu)
        statuses.append(data.get("status"))
        print(f"eval {i + 1}: {wall:.2f} s  cpu {cpu:.2f} s  status {data.get('status')}", flush=True)
    per_eval: list[float] = []
    per_eval_cpu: list[float] = []
    tmp = Path(tempfile.mkdtemp(prefix="kegen-bench-search-"))
    try:
        for i in range(search_runs):
            wall, cpu, data = one_search(ROOT, tmp, budget)
            n = int(data.get("evaluations") or 0)
            if n:
                per_eval.append(wall / n)
                per_eval_cpu.append(cpu / n)
            print(f"search {i + 1}: {wall:.2f} s for {n} evaluations", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "problem": PROBLEM,
        "candidate": SEED,
        "eval_wall_s": walls,
        "eval_median_s": statistics.median(walls) if walls else None,
        "eval_median_cpu_s": statistics.median(cpus) if cpus else None,
        "eval_status": statuses,
        "search_budget": budget,
        "search_per_eval_s": per_eval,
        "search_per_eval_median_s": statistics.median(per_eval) if per_eval else None,
        "search_per_eval_median_cpu_s": statistics.median(per_eval_cpu) if per_eval_cpu else None,
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
    }


def bench_vs_old(old_commit: str, runs: int, search_runs: int = 0, budget: int = 4) -> dict[str, Any]:
    """`kegen eval` (and a search's wall per evaluation) on an old tree vs this tree, alternating."""
    tmp = Path(tempfile.mkdtemp(prefix="kegen-old-eval-"))
    old = old_tree(old_commit, tmp / "old")
    try:
        rows: dict[str, list[float]] = {"old": [], "new": []}
        cpus: dict[str, list[float]] = {"old": [], "new": []}
        sim: dict[str, Any] = {}
        status: dict[str, Any] = {}
        for i in range(runs):
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
        per_eval: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(search_runs):
            for name, tree in (("old", old), ("new", ROOT)):
                wall, _, data = one_search(tree, tmp, budget)
                n = int(data.get("evaluations") or 0)
                if n:
                    per_eval[name].append(wall / n)
                print(f"search {i + 1} {name}: {wall:.2f} s for {n} evaluations", flush=True)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True
        )
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    search: dict[str, Any] = {}
    if all(per_eval.values()):
        med_search = {k: statistics.median(v) for k, v in per_eval.items()}
        search = {
            "search_per_eval_s": per_eval,
            "search_per_eval_median_s": med_search,
            "search_ratio_new_over_old": med_search["new"] / med_search["old"],
        }
    return {
        **search,
        "problem": PROBLEM,
        "candidate": SEED,
        "old_commit": old_commit,
        "runs": runs,
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-commit", default=None, help=f"compare with an old harness (e.g. {OLD_COMMIT})")
    ap.add_argument("--runs", type=int, default=3, help="`kegen eval` runs")
    ap.add_argument("--search-runs", type=int, default=3, help="search runs (0: none)")
    ap.add_argument("--budget", type=int, default=4, help="evaluations per search run")
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args()
    _become_subreaper()
    if args.old_commit:
        out = bench_vs_old(args.old_commit, args.runs, args.search_runs, args.budget)
    else:
        out = bench_current(args.runs, args.search_runs, args.budget)
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
