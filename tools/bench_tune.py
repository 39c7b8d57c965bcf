"""Benchmark `kegen tune` on the shipped models: writes docs/results/tune_mtia.{md,json}.

.venv/bin/python tools/bench_tune.py [--machine mtia-2i] [--budget 36] [--models dlrm,encoder]
                                     [--sizes medium|shipped] [--files a.py,b.py --out docs/results/X]

--files tunes model files written outside kegen/models (KernelBench layout) instead of the shipped ones.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kegen.models import SHIPPED, model_path
from kegen.tune import TuneError, TuneOptions, tune_file
from kegen.tune.run import geomean

ROOT = Path(__file__).resolve().parent.parent
# --sizes medium: the shipped models with more GEMM and attention work per launch (the shipped small
# defaults are launch-bound); each is a copy of the model file with these sizes as its defaults
MEDIUM = {
    "encoder": ({"batch": 2, "seq": 64, "dim": 128, "heads": 4}, {}),
    "conv_transformer": ({"batch": 2, "channels": 8, "size": 16, "dim": 64, "heads": 4}, {}),
    "int4_mlp": ({"tokens": 16, "dim": 1024, "hidden": 2816, "group": 128}, {}),
    "gqa_decoder": ({"batch": 1, "seq": 256, "dim": 512, "heads": 8, "kv_heads": 2}, {}),
    "dlrm": (
        {"batch": 64, "dense": 64, "dim": 32, "tables": 3, "rows": 256, "bag": 4},
        {  # its MLPs 128 wide (the shipped file has 32)
            "nn.Linear(dense, 32), nn.ReLU(), nn.Linear(32, dim)": "nn.Linear(dense, 128), nn.ReLU(), "
            "nn.Linear(128, dim)",
            "nn.Linear(dim + n * (n - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1)": "nn.Linear(dim + n * "
            "(n - 1) // 2, 128), nn.ReLU(), nn.Linear(128, 1)",
        },
    ),
}


def model_file(name: str, sizes: str, out: Path) -> Path:
    """The shipped model file, or (sizes "medium") a copy of it at MEDIUM's sizes."""
    path = model_path(name)
    if sizes == "shipped":
        return path
    cfg, edits = MEDIUM[name]
    text = path.read_text().replace('CFG = PRESETS["small"]', f"CFG = {cfg!r}")
    for old, new in edits.items():
        if old not in text:
            raise SystemExit(f"{path}: cannot resize ({old!r} not found)")
        text = text.replace(old, new)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.py").write_text(text)
    return out / f"{name}.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--machine", default="mtia-2i")
    ap.add_argument("--budget", type=int, default=36)
    ap.add_argument("--models", default=",".join(SHIPPED))
    ap.add_argument("--sizes", choices=("medium", "shipped"), default="medium")
    ap.add_argument("--files", default="", help="comma-separated model files to tune instead of --models")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "tune_mtia")
    ap.add_argument("--library", type=Path, default=Path("/tmp/kegen_bench_tune_library.json"))
    args = ap.parse_args()
    rows = []
    files = [Path(f) for f in args.files.split(",") if f]
    for name in [f.stem for f in files] or args.models.split(","):
        start = time.perf_counter()
        opts = TuneOptions(
            machines=(args.machine,),
            budget=args.budget,
            library=args.library,
            out=Path(f"kegen-runs/bench-tune-{name}-{int(time.time())}"),
        )
        try:
            path = (
                next(f for f in files if f.stem == name)
                if files
                else model_file(name, args.sizes, Path(f"kegen-runs/bench-tune-models-{args.sizes}"))
            )
            s = tune_file(path, opts).summary()
        except TuneError as exc:
            rows.append({"model": name, "status": exc.kind, "error": str(exc)})
            continue
        m = s["machines"][args.machine]
        rows.append(
            {
                "model": name,
                "status": "ok",
                "verified": s["verified"],
                "variants": s["variants_checked"],
                "eager_s": m["eager_s"],
                "compile_s": m["compile_s"],
                "tuned_s": m["tuned_s"],
                "speedup_vs_compile": m["speedup_vs_compile"],
                "speedup_vs_eager": m["speedup_vs_eager"],
                "amdahl_bound": m["amdahl_bound"],
                "evaluations": s["evaluations"],
                "mode": m.get("mode", ""),
                "kernels_installed": sum(k["installed"] for k in m["kernels"]),
                "kernels": len(m["kernels"]),
                "wall_s": time.perf_counter() - start,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    ok = [r for r in rows if r["status"] == "ok"]
    summary = {
        "machine": args.machine,
        "budget": args.budget,
        "sizes": "the files' own"
        if files
        else {n: MEDIUM[n][0] for n in MEDIUM}
        if args.sizes == "medium"
        else "shipped defaults",
        "models": rows,
        "geomean_vs_compile": geomean([r["speedup_vs_compile"] for r in ok]),
        "geomean_vs_eager": geomean([r["speedup_vs_eager"] or 0 for r in ok]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [
        f"# kegen tune on {args.machine} (budget {args.budget} evaluations per model)",
        "",
        "Written by tools/bench_tune.py. Times are simulated device time summed over the model's variants.",
        (
            "Models: "
            + ", ".join(str(f) for f in files)
            + " (written outside kegen/models), at their own sizes"
            if files
            else f"Sizes: {args.sizes}"
            + (
                " (" + "; ".join(f"{n} {MEDIUM[n][0]}" for n in MEDIUM) + "; DLRM MLPs 128 wide)"
                if args.sizes == "medium"
                else ""
            )
        ),
        "",
        "| model | status | variants verified | eager | torch.compile | tuned | vs compile | vs eager "
        "| Amdahl bound | kernels won | evaluations | wall | mode |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['model']} | {r['status']}: {r['error'][:80]} | | | | | | | | | | | |")
            continue
        eager = f"{r['eager_s'] * 1e6:.1f} us" if r["eager_s"] else "-"
        vs_eager = f"{r['speedup_vs_eager']:.3f}x" if r["speedup_vs_eager"] else "-"
        lines.append(
            f"| {r['model']} | ok | {r['variants'] if r['verified'] else 'NO'} | {eager} | "
            f"{r['compile_s'] * 1e6:.1f} us | {r['tuned_s'] * 1e6:.1f} us | "
            f"{r['speedup_vs_compile']:.3f}x | "
            f"{vs_eager} | {r['amdahl_bound']:.2f}x | {r['kernels_installed']}/{r['kernels']} | "
            f"{r['evaluations']} | {r['wall_s']:.0f} s | {r['mode']} |"
        )
    lines += [
        "",
        f"geomean vs torch.compile: {summary['geomean_vs_compile']:.3f}x; "
        f"vs eager: {summary['geomean_vs_eager']:.3f}x",
        "",
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines))
    print(f"geomean vs torch.compile {summary['geomean_vs_compile']:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
