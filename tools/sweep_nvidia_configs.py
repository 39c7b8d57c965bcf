"""Configuration sweep of the GPU rewrites (issue 26) per production shape class, on an H200.

`tools/bench_nvidia_moves.py` measures the few rewrites the offline operator proposes first; this
tool measures a wider grid per problem (tiles, warps, stages, GROUP_M, the flattened tile loop, warp
specialization, TMA) so the configuration lists of `mutations/gpu_moves.py` can be ordered per shape
class from measurements. Each candidate is a rewrite of the suite's seed evaluated by kegen's
evaluator (target nvidia: checked against the reference, CUDA events, L2 flushed); the native-dtype
eager / torch.compile baselines are measured in the same run. Results go to `--out`/sweep.json after
every evaluation; a deadline leaves every problem measured (round-robin over problems).

    python3 tools/sweep_nvidia_configs.py --out $OUT --deadline 400 [--grid first|second|auto]
    python3 tools/sweep_nvidia_configs.py --markdown sweep.json   # the table
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kegen.search.operators.templates.gpu_attention import AttentionConfig  # noqa: E402
from kegen.search.operators.templates.gpu_gemm import GemmConfig  # noqa: E402
from tools.bench_nvidia_moves import SUITE, environment, evaluate, native  # noqa: E402

G = GemmConfig
A = AttentionConfig
# problem -> [(variant, config)]; variant "attention" for the FlashAttention-style forward
SWEEP: dict[str, list[tuple[str, Any]]] = {
    "gemm_bf16_1024": [
        ("persistent", G(64, 128, 128, 8, 4, 3)),
        ("persistent", G(64, 128, 128, 8, 4, 4)),
        ("persistent", G(128, 128, 128, 8, 8, 3)),
        ("persistent", G(64, 128, 128, 4, 4, 3)),
        ("persistent", G(128, 64, 128, 8, 4, 3)),
        ("persistent", G(64, 128, 128, 8, 8, 3)),
        ("tma", G(64, 128, 128, 8, 4, 3)),
    ],
    "bmm_fp16": [
        ("persistent", G(128, 256, 64, 8, 8, 3)),
        ("persistent", G(128, 256, 64, 8, 8, 4)),
        ("persistent", G(256, 128, 64, 8, 8, 3)),
        ("persistent", G(128, 256, 64, 4, 8, 3)),
        ("persistent", G(128, 256, 32, 8, 8, 4)),
        ("persistent", G(128, 256, 64, 16, 8, 3)),
    ],
    "attention_fwd_fp16": [
        ("attention", A(64, 128, 4, 3)),
        ("attention", A(64, 128, 4, 3, tma=1)),
        ("attention", A(128, 128, 8, 3, tma=1)),
        ("attention", A(64, 64, 4, 3, tma=1)),
        ("attention", A(64, 128, 4, 4)),
        ("attention", A(128, 128, 8, 4, tma=1)),
        ("attention", A(64, 128, 4, 4, tma=1)),
        ("attention", A(64, 256, 8, 2)),
    ],
}
# the auto rewrite (tiles by shape class at launch) on every GEMM-class problem, persistent and TMA
AUTO_SWEEP: dict[str, list[tuple[str, Any]]] = {
    p: [("persistent", G(auto=1))] + ([] if p == "bmm_fp16" else [("tma", G(auto=1))])
    for p in (
        "gemm_fp16_512",
        "gemm_bf16_1024",
        "gemm_fp16_2048",
        "gemm_bf16_4096",
        "linear_bias_relu_fp16",
        "linear_bias_gelu_bf16",
        "bmm_fp16",
    )
}
# the first sweep (2026-12-04, runs: docs/results/nvidia_configs_h200.md) measured these too
FIRST_SWEEP: dict[str, list[tuple[str, Any]]] = {
    "gemm_bf16_1024": [
        ("persistent", G(64, 128, 64, 8, 4, 4)),
        ("persistent", G(64, 128, 64, 8, 4, 4, flatten=1)),
        ("persistent", G(64, 128, 64, 8, 4, 3)),
        ("persistent", G(64, 128, 64, 8, 4, 5)),
        ("persistent", G(128, 64, 64, 8, 4, 4)),
        ("persistent", G(64, 128, 128, 8, 4, 3)),
        ("persistent", G(64, 64, 128, 8, 4, 3)),
        ("tma", G(64, 128, 64, 8, 4, 4)),
        ("tma", G(64, 128, 64, 8, 4, 4, flatten=1)),
        ("persistent", G(64, 128, 64, 8, 4, 4, ws=1)),
        ("persistent", G(128, 128, 64, 8, 8, 3, flatten=1)),
        ("persistent", G(64, 256, 64, 8, 8, 3)),
    ],
    "gemm_fp16_2048": [
        ("persistent", G(128, 256, 64, 8, 8, 3, flatten=1)),
        ("tma", G(128, 256, 64, 8, 8, 3, flatten=1)),
        ("tma", G(128, 256, 64, 8, 8, 4)),
        ("persistent", G(128, 256, 64, 16, 8, 3)),
        ("persistent", G(256, 128, 64, 8, 8, 3)),
        ("tma", G(128, 128, 64, 8, 8, 4, flatten=1)),
        ("tma", G(128, 256, 64, 8, 8, 3, ws=1)),
        ("persistent", G(128, 128, 64, 8, 4, 4)),
        ("tma", G(128, 128, 128, 8, 8, 3)),
    ],
    "gemm_bf16_4096": [
        ("tma", G(128, 256, 64, 8, 8, 3, flatten=1)),
        ("tma", G(128, 256, 64, 8, 8, 4)),
        ("tma", G(128, 256, 64, 16, 8, 3)),
        ("persistent", G(128, 256, 64, 8, 8, 3, flatten=1)),
        ("tma", G(256, 128, 64, 8, 8, 3)),
        ("tma", G(128, 256, 64, 8, 8, 3, ws=1)),
    ],
    "bmm_fp16": [
        ("persistent", G(128, 128, 64, 8, 8, 4, flatten=1)),
        ("persistent", G(128, 128, 64, 8, 4, 3)),
        ("persistent", G(64, 128, 64, 8, 4, 4, flatten=1)),
        ("persistent", G(128, 64, 64, 8, 4, 4)),
        ("persistent", G(128, 256, 64, 8, 8, 3)),
        ("persistent", G(128, 128, 32, 8, 4, 4)),
        ("persistent", G(128, 128, 64, 4, 8, 3)),
    ],
    "attention_fwd_fp16": [
        ("attention", A(128, 128, 8, 3)),
        ("attention", A(128, 128, 8, 2)),
        ("attention", A(128, 128, 8, 4)),
        ("attention", A(128, 64, 8, 4)),
        ("attention", A(128, 128, 4, 3)),
        ("attention", A(64, 128, 4, 3)),
        ("attention", A(64, 128, 4, 2)),
        ("attention", A(64, 64, 4, 3)),
        ("attention", A(64, 32, 4, 4)),
        ("attention", A(128, 32, 8, 4)),
        ("attention", A(64, 128, 8, 3)),
        ("attention", A(128, 64, 4, 4)),
    ],
}


def _source(problem: str, variant: str, config: Any) -> str:
    from kegen.search.operators.templates import gpu_attention, gpu_gemm

    seed = (SUITE / problem / "seed.py").read_text()
    if variant == "attention":
        return gpu_attention.rewrite(seed, config)
    return gpu_gemm.rewrite(seed, variant, config)


def run(out: Path, deadline: float, only: list[str], grid: str = "second") -> dict[str, Any]:
    start = time.monotonic()
    sweep = {"first": FIRST_SWEEP, "second": SWEEP, "auto": AUTO_SWEEP}[grid]
    plan = {p: sweep[p] for p in (only or sweep)}
    res: dict[str, Any] = {"env": environment(), "problems": {p: {"candidates": []} for p in plan}}
    path = out / "sweep.json"
    work = Path(tempfile.mkdtemp(prefix="gpu_sweep_"))
    steps: list[tuple[str, str, int]] = [("native", p, 0) for p in plan]
    rounds = max(len(v) for v in plan.values())
    steps += [("cand", p, i) for i in range(rounds) for p in plan if i < len(plan[p])]
    for what, problem, i in steps:
        if time.monotonic() - start > deadline:
            res.setdefault("skipped", []).append(f"{what} {problem} {i}")
            continue
        if what == "native":
            rec = res["problems"][problem]["native"] = native(problem)
        else:
            variant, config = plan[problem][i]
            label = f"{variant} {config.label}"
            try:
                src = _source(problem, variant, config)
            except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                rec = {"label": label, "status": "refused", "message": str(e)[:300]}
            else:
                file = work / f"{problem}_{i}.py"
                file.write_text(src)
                rec = {"label": label, **evaluate(problem, file)}
            res["problems"][problem]["candidates"].append(rec)
        print(f"[{time.monotonic() - start:6.1f}s] {what} {problem} {i}: {json.dumps(rec)[:240]}", flush=True)
        path.write_text(json.dumps(res, indent=1, sort_keys=True))
    res["elapsed_s"] = round(time.monotonic() - start, 1)
    path.write_text(json.dumps(res, indent=1, sort_keys=True))
    return res


def markdown(res: dict[str, Any]) -> str:
    """Per problem: the baselines, then every candidate ranked by time (vs compile > 1: faster)."""
    lines = [f"Environment: {json.dumps(res.get('env', {}))}", ""]
    for problem, rec in res["problems"].items():
        nat = rec.get("native") or {}
        comp = nat.get("native_compile_us")
        eager = nat.get("native_eager_us")
        lines += [
            f"### {problem} (torch.compile {_f(comp)} us, eager {_f(eager)} us)",
            "",
            "| candidate | us | vs compile | vs eager |",
            "|---|---|---|---|",
        ]
        cands = sorted(rec["candidates"], key=lambda c: c.get("us") or math.inf)
        for c in cands:
            us = c.get("us") if c.get("status") == "ok" else None
            status = _f(us) if us else f"{c.get('status')}: {c.get('message', '')[:80]}"
            lines.append(f"| {c['label']} | {status} | {_r(comp, us)} | {_r(eager, us)} |")
        lines.append("")
    return "\n".join(lines)


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _r(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--deadline", type=float, default=400.0, help="seconds after which no new step starts")
    ap.add_argument("--only", default="", help="comma-separated problems (default: all of SWEEP)")
    ap.add_argument("--markdown", type=Path, help="render this JSON record as markdown and exit")
    ap.add_argument(
        "--grid", default="second", choices=("first", "second", "auto"), help="which grid to measure"
    )
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    res = run(args.out, args.deadline, [p for p in args.only.split(",") if p], args.grid)
    (args.out / "sweep.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
