"""Benchmark: kegen's TTIR parser against Triton's own TTIR generation, over the kernel corpus.

For every corpus kernel it measures (best of --repeat runs, seconds):
  triton   Triton's frontend (AST → MLIR) + its TTIR passes (what `ttir_from_jit` runs)
  lark     lark LALR parse of the TTIR text into raw records
  build    raw records → tile IR (SSA resolution, custom op forms, locations)
  verify   the tile-IR verifier
  print    the tile-IR printer
and prints a table, totals and the parse throughput. The one-off grammar construction is reported
apart. Usage: .venv/bin/python tools/bench_parse.py [--repeat N] [--json out.json] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="corpus kernels (default: all)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the measurements to this file")
    args = ap.parse_args(argv)

    from lowering.corpus import CORPUS
    from lowering.ir import print_module, verify
    from lowering.ttir.builder import IRBuilder
    from lowering.ttir.frontend import timed_ttir_from_jit
    from lowering.ttir.parser import parse_raw, ttir_parser

    t0 = time.perf_counter()
    ttir_parser()
    grammar_s = time.perf_counter() - t0

    rows = []
    for name in args.names or list(CORPUS):
        e = CORPUS[name]
        triton_s = float("inf")
        text = ""
        for _ in range(args.repeat):
            text, s = timed_ttir_from_jit(
                e.fn,
                e.signature,
                e.constexprs,
                divisible_by_16=e.divisible_by_16,
                options=e.frontend_options(),
            )
            triton_s = min(triton_s, s)
        lark_s, raw = _best(lambda text=text: parse_raw(text), args.repeat)
        build_s, module = _best(
            lambda text=text: IRBuilder(text, parse_raw(text)).build_module(), args.repeat
        )
        build_s = max(build_s - lark_s, 0.0)
        verify_s, _ = _best(lambda module=module: verify(module), args.repeat)
        print_s, _ = _best(lambda module=module: print_module(module), args.repeat)
        n_ops = sum(1 for _ in module.walk())
        rows.append(
            {
                "name": name,
                "lines": text.count("\n"),
                "bytes": len(text),
                "ops": n_ops,
                "triton_s": triton_s,
                "lark_s": lark_s,
                "build_s": build_s,
                "parse_s": lark_s + build_s,
                "verify_s": verify_s,
                "print_s": print_s,
            }
        )
        del raw

    hdr = (
        f"{'kernel':32} {'lines':>5} {'ops':>5} {'triton ms':>9} {'parse ms':>8} {'(lark':>6} {'build)':>6} "
        f"{'verify':>6} {'print':>6} {'parse/triton':>12}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(
            f"{r['name']:32} {r['lines']:5d} {r['ops']:5d} {r['triton_s'] * 1e3:9.2f} "
            f"{r['parse_s'] * 1e3:8.2f} "
            f"{r['lark_s'] * 1e3:6.2f} {r['build_s'] * 1e3:6.2f} {r['verify_s'] * 1e3:6.2f} "
            f"{r['print_s'] * 1e3:6.2f} {r['parse_s'] / r['triton_s']:12.2f}"
        )
    tot = {
        k: sum(r[k] for r in rows)
        for k in ("lines", "bytes", "ops", "triton_s", "parse_s", "lark_s", "build_s", "verify_s", "print_s")
    }
    print("-" * len(hdr))
    print(
        f"{'TOTAL (' + str(len(rows)) + ' kernels)':32} {tot['lines']:5d} {tot['ops']:5d} "
        f"{tot['triton_s'] * 1e3:9.2f} {tot['parse_s'] * 1e3:8.2f} {tot['lark_s'] * 1e3:6.2f} "
        f"{tot['build_s'] * 1e3:6.2f} {tot['verify_s'] * 1e3:6.2f} {tot['print_s'] * 1e3:6.2f} "
        f"{tot['parse_s'] / tot['triton_s']:12.2f}"
    )
    ratios = [r["parse_s"] / r["triton_s"] for r in rows]
    print(f"\ngrammar load (once per process; lark caches the LALR tables on disk): {grammar_s * 1e3:.1f} ms")
    print(
        f"parse throughput: {tot['lines'] / tot['parse_s']:.0f} TTIR lines/s, "
        f"{tot['ops'] / tot['parse_s']:.0f} ops/s, "
        f"{tot['bytes'] / tot['parse_s'] / 1e6:.2f} MB/s"
    )
    print(
        f"parse time / Triton TTIR time: median {statistics.median(ratios):.2f}, "
        f"min {min(ratios):.2f}, max {max(ratios):.2f}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"grammar_s": grammar_s, "rows": rows, "total": tot}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
