"""Where the mtia production suite stands across several recordings (issue 26): per problem, the best
correct search result of any record (by roofline fraction), the targets it meets, and what the
geomean-over-seeds goal can reach at all.

Records (`tools/record_production.py`'s JSON) are taken at different budgets, code and hosts; this
tool never mixes figures within a row: each row is one record's seed and best. The ceiling of
the geomean speedup over the seeds is the geomean of seed time / roofline time (a search that
reached 100% of every roofline); "at the targets" is the geomean with every problem at its
target fraction. Both use each row's own seed (the x seed column is over the same seed).

    python tools/production_standing.py docs/results/production_mtia.json \
        docs/results/production_mtia_2026-12-04*.json --out docs/results/production_mtia_standing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kegen.bench.metrics import geomean


def load(path: Path) -> list[dict[str, Any]]:
    """The problems of one record, each tagged with the record's file name."""
    try:
        data = json.loads(path.read_text())
        problems = data["problems"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not a record of tools/record_production.py ({exc})") from None
    return [{**p, "record": path.name, "record_budget": data.get("budget")} for p in problems]


def _best_roofline(p: dict[str, Any]) -> float:
    ok = p.get("seed_status") == "ok" and p.get("best_roofline")
    return float(p["best_roofline"]) if ok else 0.0


def standing(records: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Per problem the record row with the highest best roofline fraction; totals and ceilings."""
    if not records or not records[0]:
        raise SystemExit("no problems in the first record")
    order = [p["name"] for p in records[0]]
    rows: dict[str, dict[str, Any]] = {}
    for rec in records:
        for p in rec:
            if p["name"] not in order:
                order.append(p["name"])
            if p["name"] not in rows or _best_roofline(p) > _best_roofline(rows[p["name"]]):
                rows[p["name"]] = p
    table = []
    for name in order:
        p = rows[name]
        target = float(p.get("target_roofline") or 0.0)
        table.append(
            {
                "problem": name,
                "op_class": p.get("op_class"),
                "record": p["record"],
                "budget": p.get("record_budget"),
                "evaluations": p.get("search_evaluations"),
                "seed_roofline": p.get("seed_roofline"),
                "best_roofline": _best_roofline(p),
                "best_time_s": p.get("best_time_s"),
                "x_seed": p.get("best_speedup"),
                "target_roofline": target,
                "met": _best_roofline(p) >= target > 0,
            }
        )
    gemm = [r for r in table if r["target_roofline"] == 0.8]
    memory = [r for r in table if r["target_roofline"] == 0.85]
    seeds = [rows[n] for n in order if rows[n].get("seed_roofline")]  # each row's own seed
    totals = {
        "problems": len(table),
        "geomean_x_seed": geomean([float(r["x_seed"] or 0) for r in table]),
        "gemm_class_met": f"{sum(r['met'] for r in gemm)}/{len(gemm)}",
        "memory_bound_met": f"{sum(r['met'] for r in memory)}/{len(memory)}",
        "ceiling_x_seed": geomean([1 / float(p["seed_roofline"]) for p in seeds]),
        "at_targets_x_seed": geomean(
            [
                float(p["target_roofline"]) / float(p["seed_roofline"])
                for p in seeds
                if p.get("target_roofline")
            ]
        ),
        "geomean_roofline": geomean([r["best_roofline"] for r in table]),
    }
    return {"totals": totals, "rows": table}


def _pct(v: float | None) -> str:
    return f"{v * 100:.1f}%" if v else "-"


def markdown(data: dict[str, Any], sources: list[str]) -> str:
    """The standing as a Markdown page."""
    t = data["totals"]
    lines = [
        "# The mtia-2i production suite: best recorded search per problem",
        "",
        f"Written by `tools/production_standing.py` from {', '.join(f'`{s}`' for s in sources)}. Each row",
        "is one record's seed and best (the record with the highest roofline fraction for that problem);",
        "budgets, code and hosts differ between records (see each record's preamble).",
        "",
        "| problem | class | best roofline | target | met | x seed | seed roofline | evaluations | record |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['problem']} | {r['op_class']} | {_pct(r['best_roofline'])} | {_pct(r['target_roofline'])} "
            f"| {'yes' if r['met'] else 'no'} | {r['x_seed']:.2f}x | {_pct(r['seed_roofline'])} "
            f"| {r['evaluations']} | {r['record']} |"
            if r["x_seed"]
            else f"| {r['problem']} | {r['op_class']} | - | {_pct(r['target_roofline'])} | no | - | - | - "
            f"| {r['record']} |"
        )
    lines += [
        "",
        f"GEMM-class at >= 80% of roofline: {t['gemm_class_met']}; memory-bound at >= 85%: "
        f"{t['memory_bound_met']}; geomean roofline fraction {_pct(t['geomean_roofline'])}.",
        "",
        f"Geomean speedup over the seeds: **{t['geomean_x_seed']:.2f}x**. What that goal can reach:",
        "with every problem at 100% of its roofline the geomean over these seeds is",
        f"**{t['ceiling_x_seed']:.2f}x**; with every problem exactly at its target fraction,",
        f"{t['at_targets_x_seed']:.2f}x. A goal of 3x over the seeds therefore asks for nearly every problem",
        "at its roofline, a property of the seeds (several run at 40-90% of their roofline already), not",
        "of the search.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path, help="record JSON files; the first is the full suite")
    ap.add_argument("--out", type=Path, help="output path without suffix (.md and .json are written)")
    args = ap.parse_args(argv)
    data = standing([load(p) for p in args.records])
    text = markdown(data, [p.name for p in args.records])
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
