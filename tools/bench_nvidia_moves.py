"""The GPU rewrites of issue 26 (kegen/search/operators/templates/gpu_*.py) measured on an H200.

On the GPU machine, from the repository root (one command; results are written as they come):

    python3 tools/bench_nvidia_moves.py --out $OUT --deadline 300

Per production problem it writes the rewrites the offline operator proposes first (persistent /
TMA / split-K GEMMs, the FlashAttention-style forward, the implicit-GEMM convolution: `PLAN`) and
evaluates each with kegen's evaluator (target nvidia: checked against the reference, then timed
with CUDA events, L2 flushed); then the reference in its operands' native dtype, eager (cuBLAS /
cuDNN / SDPA) and torch.compile (`kegen.bench.native_dtype`); then the seed. Rounds go over all
problems (every problem's first rewrite, then its second, ...; the baselines after the third), so
a deadline leaves every problem measured.
`--markdown FILE.json` renders the table (docs/results/nvidia_moves_h200.md).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "kegen" / "suites" / "production"
RECORD = ROOT / "docs" / "results" / "production_nvidia.json"

# problem -> the rewrites to measure, in the order the offline operator ranks them (kind, variant, config)
PLAN: dict[str, list[tuple[str, str, int]]] = {
    "gemm_fp16_2048": [
        ("gemm", "persistent", 0),
        ("gemm", "tma", 0),
        ("gemm", "persistent", 1),
        ("gemm", "tma", 1),
    ],
    "gemm_bf16_4096": [
        ("gemm", "persistent", 0),
        ("gemm", "tma", 0),
        ("gemm", "persistent", 1),
        ("gemm", "tma", 1),
    ],
    "attention_fwd_fp16": [
        ("attention", "", 3),
        ("attention", "", 0),
        ("attention", "", 2),
        ("attention", "", 1),
    ],
    "conv2d_fp16": [("conv", "", 3), ("conv", "", 0), ("conv", "", 1), ("conv", "", 2)],
    "conv1d_fp16": [("conv", "", 3), ("conv", "", 0), ("conv", "", 1), ("conv", "", 2)],
    "linear_bias_gelu_bf16": [
        ("gemm", "persistent", 0),
        ("gemm", "tma", 0),
        ("gemm", "persistent", 1),
        ("gemm", "tma", 1),
    ],
    "linear_bias_relu_fp16": [
        ("gemm", "persistent", 1),
        ("gemm", "tma", 1),
        ("gemm", "persistent", 2),
        ("gemm", "persistent", 0),
    ],
    "gemm_bf16_1024": [
        ("gemm", "persistent", 1),
        ("gemm", "tma", 1),
        ("gemm", "persistent", 2),
        ("gemm", "split_k", 0),
    ],
    "bmm_fp16": [("gemm", "persistent", 1), ("gemm", "persistent", 2), ("gemm", "persistent", 3)],
    "gemm_fp16_512": [
        ("gemm", "persistent", 2),
        ("gemm", "persistent", 3),
        ("gemm", "split_k", 0),
        ("gemm", "tma", 1),
    ],
}


def candidate(problem: str, kind: str, variant: str, index: int) -> tuple[str, str]:
    """(label, source) of one rewrite of the problem's seed."""
    from kegen.search.operators.mutations import gpu_moves
    from kegen.search.operators.templates import gpu_attention, gpu_conv, gpu_gemm

    seed = (SUITE / problem / "seed.py").read_text()
    if kind == "gemm":
        cfg = gpu_moves.GEMM_CONFIGS[variant][index]
        return f"{variant} {cfg.label}", gpu_gemm.rewrite(seed, variant, cfg)
    if kind == "attention":
        acfg = gpu_moves.ATTENTION_CONFIGS[index]
        return f"flash {acfg.label}", gpu_attention.rewrite(seed, acfg)
    ccfg = gpu_moves.CONV_CONFIGS[index]
    return f"igemm {ccfg.label}", gpu_conv.rewrite(seed, ccfg)


TARGET = "nvidia"


def evaluate(problem: str, source: str | Path) -> dict[str, Any]:
    from kegen.eval import EvalConfig
    from kegen.eval import evaluate as kegen_evaluate

    cfg = EvalConfig(target=TARGET, timeout_s=90, gpu_profile="timing", compile_baseline=False)
    t0 = time.monotonic()
    try:
        r = kegen_evaluate(SUITE / problem / "problem.py", source, config=cfg)
    except Exception as e:  # noqa: BLE001 - a record of what failed, not a crash of the run
        return {
            "status": "error",
            "message": f"{type(e).__name__}: {e}"[:400],
            "wall_s": time.monotonic() - t0,
        }
    return {
        "status": r.status.value,
        "us": r.candidate_time_s * 1e6 if r.candidate_time_s else None,
        "message": r.message[:400],
        "wall_s": round(time.monotonic() - t0, 1),
    }


def native(problem: str) -> dict[str, Any]:
    from kegen.bench.native_dtype import native_baselines

    try:
        got = native_baselines(SUITE / problem / "problem.py")
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "message": f"{type(e).__name__}: {e}"[:400]}
    return {
        "status": "ok",
        **{k.replace("_s", "_us"): v * 1e6 for k, v in got.items() if isinstance(v, float)},
    }


def environment() -> dict[str, Any]:
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": gpu,
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def run(out: Path, deadline: float) -> dict[str, Any]:
    start = time.monotonic()
    res: dict[str, Any] = {"env": environment(), "problems": {p: {"candidates": []} for p in PLAN}}
    path = out / "nvidia_moves_h200.json"
    work = Path(tempfile.mkdtemp(prefix="gpu_moves_"))

    def save() -> None:
        path.write_text(json.dumps(res, indent=1, sort_keys=True))

    def late() -> bool:
        return time.monotonic() - start > deadline

    rounds = max(len(v) for v in PLAN.values())
    cands = [("cand", (p, i)) for i in range(rounds) for p in PLAN if i < len(PLAN[p])]
    first = 3 * len(PLAN)  # three rewrites of every problem, then the baselines, then the rest
    steps: list[tuple[str, Any]] = cands[:first] + [("native", p) for p in PLAN] + cands[first:]
    steps += [("seed", p) for p in PLAN]
    for what, arg in steps:
        if late():
            res.setdefault("skipped", []).append(f"{what} {arg}")
            continue
        if what == "cand":
            problem, i = arg
            kind, variant, index = PLAN[problem][i]
            try:
                label, src = candidate(problem, kind, variant, index)
            except Exception as e:  # noqa: BLE001
                rec = {"label": f"{kind} {variant} {index}", "status": "refused", "message": str(e)[:300]}
            else:
                file = work / f"{problem}_{i}.py"
                file.write_text(src)
                rec = {"label": label, **evaluate(problem, file)}
            res["problems"][problem]["candidates"].append(rec)
        elif what == "native":
            res["problems"][arg]["native"] = native(arg)
            rec = res["problems"][arg]["native"]
        else:
            res["problems"][arg]["seed"] = evaluate(arg, SUITE / arg / "seed.py")
            rec = res["problems"][arg]["seed"]
        print(f"[{time.monotonic() - start:6.1f}s] {what} {arg}: {json.dumps(rec)[:300]}", flush=True)
        save()
    res["elapsed_s"] = round(time.monotonic() - start, 1)
    save()
    return res


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def markdown(res: dict[str, Any]) -> str:
    """The table: per problem torch.compile, eager (cuBLAS for GEMMs), seed and the best rewrite."""
    rows_before = json.loads(RECORD.read_text()).get("rows", []) if RECORD.is_file() else []
    recorded = {r["problem"]: r for r in rows_before}
    head = [
        "| problem | compile us | eager us (cuBLAS / cuDNN / SDPA) | seed us | best rewrite | rewrite us | "
        "vs compile | vs eager | vs seed | all rewrites (us) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows, ratios = [], []
    for problem, rec in res["problems"].items():
        nat = rec.get("native") or {}
        old = recorded.get(problem, {})
        comp = nat.get("native_compile_us") or _us(old.get("compile_s"))
        eager = nat.get("native_eager_us") or _us(old.get("eager_s"))
        seed = (rec.get("seed") or {}).get("us") or _us(old.get("seed_s"))
        ok = [c for c in rec["candidates"] if c.get("status") == "ok" and c.get("us")]
        best = min(ok, key=lambda c: c["us"]) if ok else None
        b = best["us"] if best else None
        if b and comp:
            ratios.append(comp / b)
        every = "; ".join(
            f"{c['label']}: {_fmt(c.get('us')) if c.get('status') == 'ok' else c.get('status')}"
            for c in rec["candidates"]
        )
        rows.append(
            f"| {problem} | {_fmt(comp)} | {_fmt(eager)} | {_fmt(seed)} | {best['label'] if best else '-'} | "
            f"{_fmt(b)} | {_ratio(comp, b)} | {_ratio(eager, b)} | {_ratio(seed, b)} | {every} |"
        )
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else float("nan")
    env = json.dumps(res.get("env", {}))
    return "\n".join(
        [
            "# nvidia_moves_h200: the GPU rewrites of issue 26 on an H200",
            "",
            f"Recorded by `tools/bench_nvidia_moves.py` ({env}). Times are the evaluator's medians",
            "(target nvidia: correctness checked against the reference, CUDA events, L2 flushed).",
            "compile and eager are the reference in its operands' native dtype (`kegen.bench.native_dtype`;",
            "eager is cuBLAS for the GEMMs), timed in this run where it reached them, else taken from",
            "production_nvidia.json. `vs X` = X's time over the rewrite's (> 1: the rewrite is faster).",
            "",
            *head,
            *rows,
            "",
            f"Geomean of compile / best rewrite over {len(ratios)} problems: {geo:.2f}x.",
            *(
                [f"Not reached before the deadline: {', '.join(res['skipped'])}."]
                if res.get("skipped")
                else []
            ),
            "",
        ]
    )


def _us(s: float | None) -> float | None:
    return s * 1e6 if s else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds after which no new step starts")
    ap.add_argument("--markdown", type=Path, help="render this JSON record as markdown and exit")
    ap.add_argument("--only", help="comma-separated problems (default: every problem of PLAN)")
    ap.add_argument("--target", default="nvidia", help="cpu: a smoke test of the logic (interpreter)")
    args = ap.parse_args(argv)
    global TARGET
    TARGET = args.target
    if args.only:
        for p in set(PLAN) - set(args.only.split(",")):
            del PLAN[p]
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    args.out.mkdir(parents=True, exist_ok=True)
    res = run(args.out, args.deadline)
    (args.out / "nvidia_moves_h200.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
