"""kegen's template drafts evaluated on a GPU: correctness and time of each draft as drafted (no search).

Here (drafting needs no GPU): write the drafts and the pair list
    .venv/bin/python tools/eval_drafts_gpu.py draft --out .devcarry/tdrafts [--target nvidia] PROBLEM...
On the GPU machine (carry .devcarry): one JSON line per pair appended to $OUT/pairs.jsonl as each finishes
    python3 tools/eval_drafts_gpu.py eval .devcarry/tdrafts/pairs.json [--deadline 430] [--only a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def draft(problems: list[str], out: Path, target: str) -> None:
    from kegen.search.operators.drafting import draft_seeds

    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for p in map(Path, problems):
        name = p.parent.name if p.name == "problem.py" else p.stem
        try:
            drafts, _ = draft_seeds(p, inductor=False, target=target)
        except Exception as exc:  # no template: reported, the others go on
            print(f"{name}: no draft ({str(exc)[:120]})")
            continue
        for i, d in enumerate(drafts):  # the template draft, then its variants
            label = name + (f"_v{i}" if i else "")
            (out / f"{label}.py").write_text(d.source)
            pairs.append({"name": label, "problem": str(p), "candidate": str(out / f"{label}.py")})
    (out / "pairs.json").write_text(json.dumps(pairs, indent=1))
    print(f"{len(pairs)} drafts in {out}")


def evaluate(pairs_file: Path, deadline_s: float, only: set[str], target: str) -> None:
    pairs = json.loads(pairs_file.read_text())
    deadline = time.time() + deadline_s
    with open(Path(os.environ.get("OUT", ".")) / "pairs.jsonl", "a") as out:
        for p in pairs:
            if only and p["name"] not in only:
                continue
            left = deadline - time.time()
            if left < 15:
                print("deadline: stopped before", p["name"])
                break
            t = time.time()
            cmd = [
                sys.executable,
                "-m",
                "kegen",
                "eval",
                "--target",
                target,
                "--json",
                "--gpu-profile",
                "timing",
            ]
            try:
                got = subprocess.run(
                    [*cmd, "--trials", "2", p["problem"], p["candidate"]],
                    capture_output=True, text=True, timeout=min(120, left),
                )  # fmt: skip
                lines = [x for x in got.stdout.splitlines() if x.startswith("{")]
                res = json.loads(lines[-1]) if lines else {"status": "no_json", "message": got.stderr[-400:]}
            except subprocess.TimeoutExpired:
                res = {"status": "timeout"}
            rec = {
                "name": p["name"],
                "status": res.get("status"),
                "message": str(res.get("message", ""))[-400:],
                "times": res.get("times"),
                "speedups": res.get("speedups"),
                "wall": round(time.time() - t, 1),
            }
            out.write(json.dumps(rec) + "\n")
            out.flush()
            times = {k: round(v * 1e6, 1) for k, v in (rec["times"] or {}).items()}
            print(rec["name"], rec["status"], times, rec["message"][:160], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("draft")
    d.add_argument("problems", nargs="+")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--target", default="nvidia")
    e = sub.add_parser("eval")
    e.add_argument("pairs", type=Path)
    e.add_argument("--deadline", type=float, default=430)
    e.add_argument("--only", default="")
    e.add_argument("--target", default="nvidia")
    args = ap.parse_args()
    if args.cmd == "draft":
        draft(args.problems, args.out, args.target)
    else:
        evaluate(args.pairs, args.deadline, set(filter(None, args.only.split(","))), args.target)


if __name__ == "__main__":
    main()
