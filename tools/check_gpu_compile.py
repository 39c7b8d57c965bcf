"""Compile kegen's template draft of every problem for an NVIDIA GPU (sm_90) on a host without one
(kegen.bench.gpu_compile): each kernel its forward launches at the problem's own shapes, through
Triton's NVIDIA pipeline to a cubin. Finds drafts that are exact in Triton's interpreter and on the
simulator but do not compile for a GPU.

    .venv/bin/python tools/check_gpu_compile.py [--problems DIR_OR_FILE ...] [--jobs 2]
        [--out docs/results/gpu_compile_drafts]

Default problems: tools/search_probes, tools/draft_problems, the suites' and examples' problem files.
Writes <out>.json and <out>.md; exits non-zero when a kernel fails to compile.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ["tools/search_probes", "tools/draft_problems", "kegen/suites", "kegen/examples"]


def _problems(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = ROOT / p if not Path(p).is_absolute() else Path(p)
        if path.is_file():
            out.append(path)
        else:
            found = sorted(path.glob("*.py")) + sorted(path.glob("**/problem.py"))
            out += [f for f in dict.fromkeys(found) if f.name != "__init__.py" and f.name != "seed.py"]
    return out


def _name(path: Path) -> str:
    return path.parent.name if path.name == "problem.py" else path.stem


def check(problem: Path, work: Path) -> list[dict[str, Any]]:
    """One row per template draft of `problem` (the draft, then its variants) compiled for sm_90."""
    from kegen.search.operators.drafting import DraftError, draft_seeds

    row: dict[str, Any] = {"problem": str(problem.relative_to(ROOT)), "name": _name(problem)}
    try:  # the template drafts a search on an NVIDIA GPU starts from
        drafts, a = draft_seeds(problem, inductor=False, target="nvidia")
    except DraftError:
        return [{**row, "status": "no_draft"}]
    except Exception as exc:
        return [{**row, "status": "draft_error", "error": f"{type(exc).__name__}: {exc}"}]
    rows = []
    for i, draft in enumerate(drafts):
        name = _name(problem) + (f" (variant {i})" if i else "")
        rows.append(
            {
                **_compiled(
                    problem, draft.source, work / f"{_name(problem)}_{i}_{abs(hash(str(problem)))}.py"
                ),
                **row,
                "name": name,
                "op_class": a.op_class,
            }
        )
    return rows


def _compiled(problem: Path, source: str, cand: Path) -> dict[str, Any]:
    from kegen.bench.gpu_compile import compile_candidate

    t0 = time.time()
    cand.write_text(source)
    try:
        results = compile_candidate(problem, cand)
    except Exception as exc:
        return {"status": "record_error", "error": str(exc)[-800:], "wall_s": round(time.time() - t0, 1)}
    failed = [r for r in results if r.error]
    return {
        "status": "failed" if failed else ("ok" if results else "no_launch"),
        "kernels": [
            {"kernel": r.kernel, "constexprs": r.constexprs, "error": r.error[-600:]} for r in results
        ],
        "wall_s": round(time.time() - t0, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*", default=DEFAULT)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    problems = _problems(args.problems)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        rows = []
        for row in (r for found in pool.map(lambda p: check(p, Path(tmp)), problems) for r in found):
            rows.append(row)
            kernels = ", ".join(
                k["kernel"] + ("" if not k["error"] else " FAILED") for k in row.get("kernels", [])
            )
            print(f"{row['name']:<40} {row['status']:<13} {kernels}", flush=True)
    import triton

    env = {"python": platform.python_version(), "triton": triton.__version__, "target": "cuda sm_90"}
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("summary:", json.dumps(counts))
    if args.out:
        out = Path(args.out)
        out.with_suffix(".json").write_text(json.dumps({"env": env, "rows": rows}, indent=1, default=repr))
        lines = [
            "# Template drafts compiled for an NVIDIA GPU without one (sm_90)",
            "",
            f"`tools/check_gpu_compile.py` ({json.dumps(env)}): {json.dumps(counts)}.",
            "",
            "| problem | status | kernels |",
            "|---|---|---|",
        ]
        for r in rows:
            ks = ", ".join(k["kernel"] + (" (failed)" if k["error"] else "") for k in r.get("kernels", []))
            lines.append(f"| {r['name']} | {r['status']} | {ks or r.get('error', '')[:120]} |")
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 1 if any(r["status"] in ("failed", "record_error") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
