"""Compile time of `kegen lower --target mtia` per corpus kernel vs Triton's own compile to PTX.

    .venv/bin/python tools/bench_lower.py [--repeat 3] [--kernels a,b] [--json]

For each corpus kernel: wall time of triton.compile for target mtia (frontend + ttir, tile, llir,
rvasm, elf) and for target cuda sm_90 up to and including the ptx stage (frontend + ttir, ttgir,
llir, ptx; ptxas excluded), both with Triton's cache bypassed; the median of --repeat runs.
Prints a table and the geometric mean of the ratio mtia / ptx (one run, one number).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any


def _compile_times(entry: Any, target: Any, upto: str | None, repeat: int) -> float:
    """Median seconds of one uncached compilation (frontend + stages up to `upto`)."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource

    sig = {n: ("constexpr" if n in entry.constexprs else entry.signature[n]) for n in entry.fn.arg_names}
    times: list[float] = []

    def listener(*, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: bool) -> None:
        total = times.ir_initialization
        for stage, us in times.lowering_stages:
            total += us
            if stage == upto:
                break
        runs.append(total / 1e6)

    runs: list[float] = []
    old_listener, old_always = knobs.compilation.listener, knobs.compilation.always_compile
    knobs.compilation.listener = listener
    knobs.compilation.always_compile = True
    try:
        for _ in range(repeat):
            triton.compile(ASTSource(entry.fn, sig, dict(entry.constexprs)), target=target)
    finally:
        knobs.compilation.listener, knobs.compilation.always_compile = old_listener, old_always
    times.extend(runs)
    return statistics.median(times)


def main() -> int:
    from triton.backends.compiler import GPUTarget

    from lowering.corpus import CORPUS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", default="", help="comma-separated corpus names (default: all)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    names = [n for n in args.kernels.split(",") if n] or list(CORPUS)
    mtia, cuda = GPUTarget("mtia", "2i", 1), GPUTarget("cuda", 90, 32)
    rows: list[dict[str, Any]] = []
    for target in (mtia, cuda):  # warm up: imports, LLVM targets, lark tables
        try:
            _compile_times(CORPUS[names[0]], target, None, 1)
        except Exception:  # noqa: BLE001, S110 - the measured runs report errors
            pass
    for name in names:
        entry = CORPUS[name]
        row: dict[str, Any] = {"kernel": name}
        try:
            row["ptx_s"] = _compile_times(entry, cuda, "ptx", args.repeat)
        except Exception as exc:  # noqa: BLE001 - report and continue with the next kernel
            row["error"] = f"ptx: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        try:
            row["mtia_s"] = _compile_times(entry, mtia, None, args.repeat)
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"mtia: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        if "mtia_s" in row and "ptx_s" in row:
            row["ratio"] = row["mtia_s"] / row["ptx_s"]
        rows.append(row)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else float("nan")
    summary = {
        "kernels": len(rows),
        "compared": len(ratios),
        "geomean_ratio_mtia_over_ptx": geo,
        "total_mtia_s": sum(r.get("mtia_s", 0.0) for r in rows),
        "total_ptx_s": sum(r.get("ptx_s", 0.0) for r in rows),
    }
    if args.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=1))
        return 0
    print(f"{'kernel':34} {'mtia ms':>9} {'ptx ms':>9} {'ratio':>7}")
    for r in rows:
        if "ratio" in r:
            print(f"{r['kernel']:34} {r['mtia_s'] * 1e3:9.1f} {r['ptx_s'] * 1e3:9.1f} {r['ratio']:7.2f}")
        else:
            print(f"{r['kernel']:34} {'':>9} {'':>9} {'':>7}  {r.get('error', '')}")
    print(
        f"\n{summary['compared']}/{summary['kernels']} kernels compared; geometric mean of mtia/ptx compile "
        f"time: {geo:.2f}x (total {summary['total_mtia_s']:.2f} s vs {summary['total_ptx_s']:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
