"""The summary of a production-suite recording (tools/record_production_gpu.py): one row per problem
from its record, totals (geomean speedups, wall per evaluation) and the markdown table, written to
`<out>/<name>.json` and `.md`."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

PROFILE_METRICS = (
    "dram_bw_pct",
    "sm_throughput_pct",
    "occupancy_pct",
    "l2_hit_rate_pct",
    "roofline_fraction",
)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _fastest(*times: float | None) -> float | None:
    vals = [t for t in times if t]
    return min(vals) if vals else None


def summarize(name: str, rec: dict[str, Any], problem_path: Path | None = None) -> dict[str, Any]:
    """One row of the summary table from a problem's record. Eager and compile are the faster of the
    reference as written and the reference in its native dtype (where that was timed)."""
    from kegen.bench.native_dtype import reference_upcasts

    seed, search = rec.get("seed") or {}, rec.get("search") or {}
    native: dict[str, Any] = rec.get("native") or {}
    if native.get("status") != "ok":
        native = {}
    best_s = search.get("best_s") or (seed.get("seed_s") if seed.get("status") == "ok" else None)
    walls = [*(seed.get("warm_eval_wall_s") or []), *(search.get("eval_wall_s") or [])[1:]]
    eager = _fastest(seed.get("eager_s"), native.get("native_eager_s"))
    compiled = _fastest(seed.get("compile_s"), native.get("native_compile_s"))
    return {
        "problem": name,
        "reference_upcasts": reference_upcasts(problem_path),
        "native_timed": bool(native),
        "status": seed.get("status"),
        "eager_s": eager,
        "compile_s": compiled,
        "upcast_compile_s": seed.get("compile_s"),
        "native_compile_s": native.get("native_compile_s"),
        "seed_s": seed.get("seed_s"),
        "best_s": best_s,
        "roofline_s": seed.get("roofline_s"),
        "seed_over_compile": _ratio(compiled, seed.get("seed_s")),
        "best_over_seed": _ratio(seed.get("seed_s"), best_s) if search else None,
        "best_over_eager": _ratio(eager, best_s),
        "best_over_compile": _ratio(compiled, best_s),
        "best_roofline_fraction": _ratio(seed.get("roofline_s"), best_s),
        "evaluations": search.get("evaluations"),
        "evals_to_90pct_of_best": search.get("evals_to_90pct_of_best"),
        "first_eval_wall_s": seed.get("first_eval_wall_s"),
        "eval_wall_median_s": statistics.median(walls) if walls else None,
        "compile_error": seed.get("compile_error"),
        "message": seed.get("message") if seed.get("status") != "ok" else None,
        "best_profile": search.get("best_profile") or seed.get("profile") or {},
    }


def geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def write_summary(
    out: Path, name: str, env: dict[str, Any], per_problem: Path, order: dict[str, Path]
) -> dict[str, Any]:
    """`<out>/<name>.json` and `.md` from every per-problem record there (this run's or earlier ones');
    `order` maps the suite's problem names, in order, to their problem files."""
    recs = {p.stem: json.loads(p.read_text()) for p in sorted(per_problem.glob("*.json"))}
    recorded = [r["environment"] for r in recs.values() if isinstance(r.get("environment"), dict)]
    if recorded:  # the machine the records were taken on (--summary-only runs anywhere)
        env = max(recorded, key=lambda e: str(e.get("recorded_utc", "")))
    names = [n for n in order if n in recs] + sorted(n for n in recs if n not in order)
    rows = [summarize(n, recs[n], order.get(n)) for n in names]
    totals = {
        "problems": len(rows),
        "ok": sum(1 for r in rows if r["status"] == "ok"),
        "geomean_seed_over_compile": geomean([r["seed_over_compile"] for r in rows]),
        "geomean_best_over_seed": geomean([r["best_over_seed"] for r in rows]),
        "geomean_best_over_compile": geomean([r["best_over_compile"] for r in rows]),
        "geomean_best_over_eager": geomean([r["best_over_eager"] for r in rows]),
        "median_eval_wall_s": _median([r["eval_wall_median_s"] for r in rows]),
        "median_first_eval_wall_s": _median([r["first_eval_wall_s"] for r in rows]),
    }
    data = {"environment": env, "totals": totals, "rows": rows, "records": recs}
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    (out / f"{name}.md").write_text(markdown(name, env, totals, rows))
    return data


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _us(s: float | None) -> str:
    return f"{s * 1e6:.1f}" if s else "-"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def _pct(v: float | None) -> str:
    return f"{v * 100:.0f}%" if v else "-"


def _sec(v: float | None) -> str:
    return f"{v:.1f}" if v is not None else "-"


def markdown(name: str, env: dict[str, Any], totals: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        f"# {name}: the production suite on {env.get('device')} (target {env.get('target')})",
        "",
        f"Recorded by `tools/record_production_gpu.py` ({json.dumps(env)}). On GPUs times are medians of",
        "CUDA-event samples (L2 flushed, fresh verified inputs per call); eager and torch.compile are timed",
        "by the evaluator; `best` is the offline search's fastest correct candidate (the seed if none beat",
        "it); roofline = the problem's roofline time over best's. Wall = seconds per evaluation after the",
        "first (warm seed re-evaluations and search candidates); 1st eval = the seed's, cold.",
        "",
        "| problem | status | eager us | compile us | seed us | best us | seed/compile | best/seed "
        "| best/compile | roofline | evals | to 90% | 1st eval s | wall/eval s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['problem']} | {r['status']} | {_us(r['eager_s'])} | {_us(r['compile_s'])} "
            f"| {_us(r['seed_s'])} "
            f"| {_us(r['best_s'])} | {_x(r['seed_over_compile'])} | {_x(r['best_over_seed'])} "
            f"| {_x(r['best_over_compile'])} | {_pct(r['best_roofline_fraction'])} "
            f"| {r['evaluations'] or '-'} | {r['evals_to_90pct_of_best'] or '-'} "
            f"| {_sec(r['first_eval_wall_s'])} | {_sec(r['eval_wall_median_s'])} |"
        )
    lines += [
        "",
        f"Problems: {totals['problems']} ({totals['ok']} seeds correct). Geomean speedups: seed over compile "
        f"{_x(totals['geomean_seed_over_compile'])}, best over seed {_x(totals['geomean_best_over_seed'])}, "
        f"best over torch.compile {_x(totals['geomean_best_over_compile'])} (target >= 1.0x), "
        f"best over eager {_x(totals['geomean_best_over_eager'])}. Median wall per evaluation after the "
        f"first: {_sec(totals['median_eval_wall_s'])} s (target <= 10 s); first evaluation of a problem: "
        f"{_sec(totals['median_first_eval_wall_s'])} s.",
    ]
    notes = [
        f"- {r['problem']}: {r['message'] or r['compile_error']}"
        for r in rows
        if r["message"] or r["compile_error"]
    ]
    if notes:
        lines += ["", "Failures and missing baselines:", *notes]
    slower = [r for r in rows if r["best_over_compile"] and r["best_over_compile"] < 1.0]
    if slower:
        lines += [
            "",
            "Below torch.compile (the best kernel found, its roofline fraction and what its profile says):",
        ]
        lines += [
            f"- {r['problem']}: {_x(r['best_over_compile'])} of torch.compile ({_us(r['compile_s'])} us); "
            f"{_pct(r['best_roofline_fraction'])} of roofline; {_limit(r['best_profile'])}"
            for r in slower
        ]
    native = [r["problem"] for r in rows if r.get("native_timed")]
    untimed = [r["problem"] for r in rows if r.get("reference_upcasts") and not r.get("native_timed")]
    if native:
        lines += [
            "",
            "Eager and compile are the faster of the reference as written and the reference in the",
            "operands' native dtype for " + ", ".join(native) + ": their references upcast fp16/bf16 to",
            "float32 (exact and fast as a CPU-hosted reference), which on a GPU is an fp32 computation no",
            "production model runs; the native-dtype times (`kegen.bench.native_dtype`, timed as the",
            "evaluator times baselines: L2 flushed, launch overhead hidden) are in each record's `native`.",
        ]
    if untimed:
        lines += [
            "",
            "**Read the eager/compile columns of these problems with care:** their references call",
            "`.float()` and no native-dtype baseline was recorded, so eager/compile may be fp32",
            "computations that overstate the gain over cuBLAS/cuDNN: " + ", ".join(untimed) + ".",
        ]
    return "\n".join(lines) + "\n"


def _limit(profile: dict[str, Any]) -> str:
    """What a profile summary says limits the kernel (ncu's bottleneck and metrics where it ran)."""
    metrics = [
        f"{k} {profile[k]:.1f}" for k in PROFILE_METRICS[:4] if isinstance(profile.get(k), (int, float))
    ]
    if profile.get("bottleneck") or metrics:
        return f"bottleneck {profile.get('bottleneck') or '-'}" + (
            f" ({', '.join(metrics)})" if metrics else ""
        )
    return "no ncu profile of this kernel recorded (gpu_profile=auto profiles improvements only)"
