"""Validate every seed of a suite on mtia at full size with `kegen eval`, one problem at a time.

    python tools/validate_production_seeds.py [--only a,b] [--trials 1] [--dir runs/seed-validation]

Each problem's `kegen eval --json` output is kept in `<dir>/<problem>.json` (a problem with a
non-empty one is skipped: the tool resumes), then `docs/results/production_mtia_seeds.{md,json}`
are written from all of them: status, simulated seed time, roofline fraction and bound, wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kegen.suites import find_suite

ROOT = Path(__file__).resolve().parent.parent


def evaluate(problem_dir: Path, out: Path, trials: int, timeout_s: float) -> None:
    """`kegen eval` of the seed, its JSON verdict written to `out` (with the wall time)."""
    cmd = [sys.executable, "-m", "kegen", "eval", str(problem_dir / "problem.py"),
           str(problem_dir / "seed.py"), "--target", "mtia", "--trials", str(trials),
           "--timeout", str(timeout_s), "--json"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    data: dict[str, Any] = json.loads(lines[-1]) if lines else {
        "status": "error", "message": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    data["validation_wall_s"] = round(time.monotonic() - t0, 1)
    data["validation_trials"] = trials
    out.write_text(json.dumps(data))


def row(name: str, data: dict[str, Any]) -> dict[str, Any]:
    details = data.get("details") or {}
    roof = details.get("roofline") or {}
    return {
        "problem": name, "status": data.get("status"), "message": (data.get("message") or "")[:300],
        "seed_time_s": data.get("candidate_time_s"),
        "roofline_fraction": (data.get("speedups") or {}).get("roofline"),
        "bound": roof.get("bound"), "max_abs_error": data.get("max_abs_error"),
        "trials": data.get("validation_trials"),
        "wall_s": data.get("validation_wall_s") or data.get("wall_time_s"),
    }


def markdown(rows: list[dict[str, Any]], command: str, note: str = "") -> str:
    def t(v: Any) -> str:
        return "-" if v is None else (f"{v * 1e6:.1f} us" if v < 1e-3 else f"{v * 1e3:.3g} ms")

    lines = ["# Production suite seeds on mtia-2i: correctness at full size", "",
             f"`{command}`: `kegen eval PROBLEM SEED --target mtia` per problem (random trials + the "
             "precision trial, every call checked against the PyTorch reference at the problem's own "
             "shapes). Wall times depend on the host and its load, not only on the simulator.", "",
             "| problem | status | seed time (simulated) | roofline fraction | bound | max abs error "
             "| trials | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        frac = "-" if r["roofline_fraction"] is None else f"{100 * r['roofline_fraction']:.1f}%"
        err = "-" if r["max_abs_error"] is None else f"{r['max_abs_error']:.3g}"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['message']}"
        lines.append(f"| {r['problem']} | {status} | {t(r['seed_time_s'])} | {frac} | {r['bound'] or '-'} "
                     f"| {err} | {r['trials'] or '-'} | {r['wall_s'] or '-'} |")
    if note:
        lines += ["", note.strip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="production")
    ap.add_argument("--only", default="")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=2400.0)
    ap.add_argument("--dir", type=Path, default=ROOT / "runs" / "seed-validation")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "production_mtia_seeds")
    ap.add_argument("--assemble-only", action="store_true")
    ap.add_argument("--note", default="", help="a paragraph appended to the Markdown")
    args = ap.parse_args(argv)
    suite = find_suite(args.suite).select([n for n in args.only.split(",") if n])
    args.dir.mkdir(parents=True, exist_ok=True)
    for p in suite.problems:
        out = args.dir / f"{p.name}.json"
        if args.assemble_only or (out.is_file() and out.stat().st_size):
            continue
        print(f"evaluating {p.name} ...", flush=True)
        evaluate(p.folder, out, args.trials, args.timeout)
    rows = [row(p.name, json.loads(f.read_text())) for p in find_suite(args.suite).problems
            if (f := args.dir / f"{p.name}.json").is_file() and f.stat().st_size]
    given = argv if argv is not None else sys.argv[1:]
    command = "python tools/validate_production_seeds.py " + " ".join(
        a for i, a in enumerate(given) if a != "--note" and (i == 0 or given[i - 1] != "--note"))
    args.out.with_suffix(".json").write_text(json.dumps({"command": command, "seeds": rows}, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, command, args.note))
    print(markdown(rows, command, args.note))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
