"""Draft coverage: Inductor drafts (and template drafts) of a broad KernelBench-format problem set,
checked on the simulated MTIA, and torch.compile on mtia as the baseline.

    .venv/bin/python tools/bench_draft_coverage.py [--problems tools/draft_problems] [--out docs/results]
        [--only SUBSTR] [--no-baseline] [--no-templates] [--memory] [--per-version]

Per problem: Inductor draft (time to draft), `kegen.eval.evaluate` of the draft on mtia (status,
simulated time), the hand-written template draft where one matches (its simulated time and the
ratio), and `compile_baseline` (torch.compile on mtia). Writes draft_coverage.{json,md} and
compile_baseline.{json,md} under --out; with `--per-version`, draft_coverage_torch<X.Y.Z>.{json,md}
(the torch, Triton and Python versions are recorded in every summary). `--memory` also drafts a
KernelBench-size problem in a fresh process and records its peak memory (the trace uses fake tensors).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_COVERAGE = 0.95
TARGET_TEMPLATE_RATIO = 1.5
TARGET_DRAFT_S = 30.0
# KernelBench level-1 "softmax" size: a 4096 x 393216 fp32 input is 6.4 GB
LARGE_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(393216 // 64)

    def forward(self, x):
        return torch.softmax(self.ln(x.view(4096, 64, -1)).view(4096, -1), dim=1)

def get_inputs():
    return [torch.randn(4096, 393216)]

def get_init_inputs():
    return []
"""


def _eval(problem: Path, source: str) -> dict[str, Any]:
    from kegen.eval import EvalConfig, evaluate

    cfg = EvalConfig(target="mtia", trials=2, profile=False, timing_runs=1, compile_baseline=False)
    r = evaluate(problem, source, config=cfg)
    status = str(getattr(r.status, "value", r.status))
    seconds = r.candidate_time_s
    return {"status": status, "seconds": seconds, "message": (r.message or "")[:300]}


def one(problem: Path, baseline: bool, templates: bool) -> dict[str, Any]:
    from kegen.inductor.capture import CaptureError
    from kegen.inductor.draft import draft_from_inductor
    from kegen.search.operators.drafting import analyze

    row: dict[str, Any] = {"problem": problem.stem, "category": problem.stem.split("__")[0]}
    t0 = time.perf_counter()
    try:
        source, info = draft_from_inductor(problem)
        row["draft_s"] = round(time.perf_counter() - t0, 2)
        row["kernels"] = len(info.kernels) + len(info.extern)
        row["inductor"] = _eval(problem, source)
    except CaptureError as exc:
        row["draft_s"] = round(time.perf_counter() - t0, 2)
        row["inductor"] = {"status": "refused", "seconds": None, "message": str(exc)[:300]}
    if templates:
        a = analyze(problem)
        if a.source is not None:
            row["template"] = {"op_class": a.op_class, **_eval(problem, a.source)}
    if baseline:
        from kegen.inductor.baseline import compile_baseline

        try:
            b = compile_baseline(problem)
            row["compile"] = {"seconds": b.seconds, "host_ops": b.host_ops, "kernels": len(b.kernels)}
        except Exception as exc:  # recorded, not fatal: the table shows what failed
            row["compile"] = {"seconds": None, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return row


def memory_check() -> dict[str, Any]:
    """Peak RSS of drafting a KernelBench-size problem (fresh process) vs the size of its input."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "large_softmax.py"
        path.write_text(LARGE_PROBLEM)
        code = (
            "import sys, time; from pathlib import Path;"
            "from kegen.search.operators.drafting import draft_seeds;"
            "t = time.perf_counter(); d, _ = draft_seeds(Path(sys.argv[1]));"
            "print([x.origin for x in d], round(time.perf_counter() - t, 2))"
        )
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "problem": "softmax(LayerNorm(x)) with x of 4096 x 393216 fp32 (6.4 GB)",
        "input_gb": round(4096 * 393216 * 4 / 1e9, 2),
        "peak_rss_mb": round(peak_mb, 1),
        "wall_s": round(wall, 2),
        "ok": proc.returncode == 0,
        "drafts": proc.stdout.strip()[-200:],
        "error": proc.stderr.strip().splitlines()[-1] if proc.returncode else "",
    }


def versions() -> dict[str, str]:
    """The torch, Triton and Python this measurement ran on."""
    import platform

    import torch
    import triton

    return {
        "torch": str(torch.__version__),
        "triton": str(triton.__version__),
        "python": platform.python_version(),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["inductor"]["status"] == "ok"]
    ratios = [
        r["inductor"]["seconds"] / r["template"]["seconds"]
        for r in ok
        if r.get("template", {}).get("status") == "ok"
        and r["inductor"]["seconds"]
        and r["template"]["seconds"]
    ]
    vs_compile = [
        r["inductor"]["seconds"] / r["compile"]["seconds"]
        for r in ok
        if r.get("compile", {}).get("seconds") and r["inductor"]["seconds"]
    ]
    cats: dict[str, list[int]] = {}
    for r in rows:
        c = cats.setdefault(r["category"], [0, 0])
        c[0] += r["inductor"]["status"] == "ok"
        c[1] += 1
    return {
        "versions": versions(),
        "problems": len(rows),
        "correct_drafts": len(ok),
        "coverage": round(len(ok) / max(len(rows), 1), 3),
        "by_category": {k: f"{v[0]}/{v[1]}" for k, v in sorted(cats.items())},
        # the first draft of a process also imports and warms up Inductor and the lowering
        "first_draft_s_cold": rows[0]["draft_s"] if rows else 0.0,
        "max_draft_s_warm": max((r["draft_s"] for r in rows[1:]), default=0.0),
        "median_draft_s": sorted(r["draft_s"] for r in rows)[len(rows) // 2] if rows else 0.0,
        "template_comparisons": len(ratios),
        "worst_inductor_over_template": round(max(ratios), 3) if ratios else None,
        "median_inductor_over_template": round(sorted(ratios)[len(ratios) // 2], 3) if ratios else None,
        "median_draft_over_compile": round(sorted(vs_compile)[len(vs_compile) // 2], 3)
        if vs_compile
        else None,
        "targets": {
            "coverage": TARGET_COVERAGE,
            "inductor_over_template": TARGET_TEMPLATE_RATIO,
            "draft_s": TARGET_DRAFT_S,
        },
    }


def _us(s: float | None) -> str:
    return "-" if not s else f"{s * 1e6:.2f}"


def write(
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    memory: dict[str, Any] | None,
    out: Path,
    stem: str = "draft_coverage",
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {"summary": summary, "memory": memory, "rows": rows}
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    v = summary["versions"]
    lines = [
        f"# Draft coverage (Inductor drafts on the simulated MTIA, mtia-2i): torch {v['torch']}, "
        f"Triton {v['triton']}, Python {v['python']}",
        "",
        "Measured by `tools/bench_draft_coverage.py` on the problems in",
        "`tools/draft_problems/` (KernelBench format, reduced shapes). Times are simulated device times per",
        "forward (us); ratio = Inductor draft time / hand-written template draft time.",
        "",
        "```",
        json.dumps(summary, indent=1),
        "```",
        "",
    ]
    if memory:
        lines += [
            "Memory of drafting a KernelBench-size problem (fresh process):",
            "",
            "```",
            json.dumps(memory, indent=1),
            "```",
            "",
        ]
    lines += [
        "| problem | draft | draft s | draft us | template | template us | ratio | compile us |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ind, tpl, comp = r["inductor"], r.get("template", {}), r.get("compile", {})
        ratio = (
            f"{ind['seconds'] / tpl['seconds']:.2f}"
            if ind.get("seconds") and tpl.get("seconds") and tpl.get("status") == "ok"
            else "-"
        )
        lines.append(
            f"| {r['problem']} | {ind['status']} | {r['draft_s']} | {_us(ind.get('seconds'))} | "
            f"{tpl.get('status', '-')} | {_us(tpl.get('seconds'))} | {ratio} | {_us(comp.get('seconds'))} |"
        )
    failures = [r for r in rows if r["inductor"]["status"] != "ok"]
    if failures:
        lines += ["", "Failures:", ""] + [f"- {r['problem']}: {r['inductor']['message']}" for r in failures]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    base = [{"problem": r["problem"], **r["compile"]} for r in rows if "compile" in r]
    if base:
        base_stem = "compile_baseline" + stem.removeprefix("draft_coverage")
        (out / f"{base_stem}.json").write_text(json.dumps(base, indent=1) + "\n")
        md = [
            "# torch.compile on the simulated MTIA (mtia-2i): the compile baseline",
            "",
            "`kegen.inductor.baseline.compile_baseline` per problem of `tools/draft_problems/` (measured by",
            "`tools/bench_draft_coverage.py`): simulated device time of one forward of torch.compile(Model),",
            "GEMMs/convolutions as kegen's Triton kernels; ops left on the host are named (their time is",
            "not counted).",
            "",
            "| problem | compile us | kernels | host ops | drafted seed us | seed / compile |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            c = r.get("compile")
            if not c:
                continue
            seed = r["inductor"].get("seconds") if r["inductor"]["status"] == "ok" else None
            ratio = f"{seed / c['seconds']:.2f}" if seed and c.get("seconds") else "-"
            host = ", ".join(c.get("host_ops", [])) or c.get("error", "") or "none"
            cells = [r["problem"], _us(c.get("seconds")), str(c.get("kernels", "-")), host, _us(seed), ratio]
            md.append("| " + " | ".join(cells) + " |")
        (out / f"{base_stem}.md").write_text("\n".join(md) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=Path, default=ROOT / "tools" / "draft_problems")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--only", default="", help="only problems whose name contains this")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-templates", action="store_true")
    ap.add_argument(
        "--memory", action="store_true", help="also draft a KernelBench-size problem and record memory"
    )
    ap.add_argument(
        "--per-version",
        action="store_true",
        help="write draft_coverage_torch<version>.{json,md} (one record per torch release)",
    )
    args = ap.parse_args()
    rows = []
    for p in sorted(args.problems.glob("*.py")):
        if args.only and args.only not in p.stem:
            continue
        row = one(p, baseline=not args.no_baseline, templates=not args.no_templates)
        print(
            json.dumps({k: row[k] for k in ("problem", "draft_s")} | {"status": row["inductor"]["status"]}),
            flush=True,
        )
        rows.append(row)
    memory = memory_check() if args.memory else None
    summary = summarize(rows)
    print(json.dumps({"summary": summary, "memory": memory}, indent=1))
    stem = "draft_coverage"
    if args.per_version:
        stem += "_torch" + summary["versions"]["torch"].split("+")[0]
    write(rows, summary, memory, args.out, stem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
