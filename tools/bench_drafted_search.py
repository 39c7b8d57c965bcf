"""Search from drafts on problems kegen was not developed on: `kegen evolve` with no seed, as a user
runs it on a new model's op.

    .venv/bin/python tools/bench_drafted_search.py [--problems tools/search_probes] [--budget 8]
        [--jobs 2] [--at-once 1] [--only a,b] [--target mtia] [--out docs/results/drafted_search_mtia]

Per problem (a KernelBench-format file of `--problems`): every draft the search started from (origin
and simulated time: Inductor's as written, Inductor's in the operands' dtype, kegen's template), the
best kernel after `--budget` evaluations, its roofline fraction (the evaluator's), the speedup over the
draft as written and over the best draft, evaluations and wall time. Each search has its own store
(no warm start from earlier runs). Writes <out>.json and <out>.md; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEGEN = [sys.executable, "-m", "kegen"]


def search(
    problem: Path, work: Path, budget: int, jobs: int, target: str, timeout_s: float
) -> dict[str, Any]:
    """One `kegen evolve` (no seed) of `problem` in `work/<name>`; its drafts and best from its store."""
    out = work / problem.stem
    out.mkdir(parents=True, exist_ok=True)
    cmd = [*KEGEN, "evolve", str(problem), "--target", target, "--budget", str(budget)]
    cmd += ["--jobs", str(jobs), "--no-progress", "--no-warm-start"]
    cmd += ["--out", str(out / "run"), "--db", str(out / "search.db")]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, log = 124, f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after {timeout_s:.0f} s"
    (out / "evolve.log").write_text(log if isinstance(log, str) else str(log))
    row: dict[str, Any] = {"problem": problem.stem, "rc": rc, "wall_s": round(time.time() - t0, 1)}
    if rc != 0 or not (out / "run" / "run.json").is_file():
        row["error"] = log.strip().splitlines()[-1][:400] if log.strip() else f"exit {rc}"
        return row
    run_id = json.loads((out / "run" / "run.json").read_text())["run_id"]
    return row | _from_store(out / "search.db", run_id)


def _from_store(db: Path, run_id: str) -> dict[str, Any]:
    from kegen.search.store import GraphStore

    store = GraphStore(str(db))
    nodes = store.nodes(run_id)
    root = store.root(run_id)
    drafts = [n for n in nodes if n.id == (root.id if root else None) or n.operator == "draft"]
    evs = {n.id: store.evaluation(n.id) for n in nodes}
    ok = [
        n for n in nodes if evs[n.id] is not None and evs[n.id].status == "ok" and evs[n.id].candidate_time_s
    ]
    best = min(ok, key=lambda n: evs[n.id].candidate_time_s) if ok else None

    def t(n: Any) -> float | None:
        ev = evs.get(n.id)
        return ev.candidate_time_s if ev is not None and ev.status == "ok" else None

    draft_rows = []
    for n in drafts:
        ev = evs[n.id]
        is_root = root is not None and n.id == root.id
        status = ev.status if ev else "-"
        draft_rows.append({"origin": _origin(n.description, is_root), "time_s": t(n), "status": status})
    written = t(root) if root else None
    timed = [d["time_s"] for d in draft_rows if d["time_s"]]
    best_s = evs[best.id].candidate_time_s if best else None
    return {
        "drafts": draft_rows,
        "best_time_s": best_s,
        "best_roofline": evs[best.id].roofline_fraction if best else None,
        "best_move": best.description[:160] if best else None,
        "best_vs_compile": (evs[best.id].metrics.get("speedups") or {}).get("compile") if best else None,
        "x_written": written / best_s if written and best_s else None,
        "x_best_draft": min(timed) / best_s if timed and best_s else None,
        "evaluations": json.loads((db.parent / "run" / "run.json").read_text()).get("evaluations"),
    }


def _origin(description: str, is_root: bool) -> str:
    if is_root and "drafted from a template" in description and "TorchInductor" not in description:
        return "template (Inductor drafts nothing)"
    if is_root:
        return "inductor (as written)"
    if "operands' dtype" in description:
        return "inductor (native dtype)"
    if "template" in description:
        variant = description.rsplit("; ", 1)[-1].rstrip(")") if "; " in description else ""
        return f"template ({variant})" if variant else "template"
    return description[:40]


def _us(s: float | None) -> str:
    return f"{s * 1e6:.1f}" if s else "-"


def table(rows: list[dict[str, Any]]) -> str:
    head = "| problem | drafts (us) | best us | roofline | x as written | x best draft | vs compile | evals "
    head += "| wall s |\n"
    head += "|---|---|---|---|---|---|---|---|---|\n"
    lines = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | error: {r['error']} | - | - | - | - | - | - | {r['wall_s']} |")
            continue
        drafts = "; ".join(
            f"{d['origin']} {_us(d['time_s']) if d['time_s'] else d['status']}" for d in r["drafts"]
        )
        roof = f"{r['best_roofline']:.1%}" if r.get("best_roofline") else "-"
        xw = f"{r['x_written']:.2f}x" if r.get("x_written") else "-"
        xd = f"{r['x_best_draft']:.2f}x" if r.get("x_best_draft") else "-"
        xc = f"{r['best_vs_compile']:.2f}x" if r.get("best_vs_compile") else "-"
        lines.append(f"| {r['problem']} | {drafts} | {_us(r['best_time_s'])} | {roof} | {xw} | {xd} | {xc} | "
                     f"{r['evaluations']} | {r['wall_s']} |")  # fmt: skip
    return head + "\n".join(lines) + "\n"


def _write(out: Path, env: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    md = (
        f"# Search from drafts ({env['target']}): no seed, problems outside the suites\n\n"
        f"Written by `tools/bench_drafted_search.py` ({json.dumps(env)}). Times are simulated device "
        "times of one forward; x as written = the Inductor draft of the reference as written over the "
        "best; x best draft = the fastest draft over the best.\n\n" + table(rows)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    out.with_suffix(".md").write_text(md)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=ROOT / "tools" / "search_probes")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2, help="evaluations at once per search")
    ap.add_argument("--at-once", type=int, default=1, help="searches side by side")
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--target", default="mtia")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per search")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/kegen_drafted_search"))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "drafted_search_mtia")
    a = ap.parse_args(argv)
    problems = sorted(a.problems.glob("*.py"))
    if a.only:
        keep = set(a.only.split(","))
        problems = [p for p in problems if p.stem in keep]
    if not problems:
        print(f"no problems in {a.problems}" + (f" named {a.only}" if a.only else ""), file=sys.stderr)
        return 2
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    env = {
        "python": platform.python_version(),
        "host_cores": os.cpu_count(),
        "target": a.target,
        "budget": a.budget,
        "jobs": a.jobs,
        "at_once": a.at_once,
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    rows: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(1, a.at_once)) as pool:
        args = (a.work_dir, a.budget, a.jobs, a.target, a.timeout)
        futures = [pool.submit(search, p, *args) for p in problems]
        for done in as_completed(futures):  # written as each search ends: a cut-off run keeps the rest
            rows.append(done.result())
            rows.sort(key=lambda r: r["problem"])
            _write(a.out, env, rows)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
