"""Evaluate the offline operator's whole-plan moves (`mutations/plans.py`) of a production seed.

For each problem: evaluate the seed on the simulated mtia target, generate the `fill`/`plan` moves
from the seed's source and its measured profile (as the offline operator does), and evaluate each
move's result. Prints one row per candidate (status, simulated time, roofline fraction, the
blocks and options the move set) and writes JSON.

    KEGEN_SUITE_SCALE=0.5 python tools/bench_gemm_class_moves.py \
        --problems linear_bias_gelu_bf16,conv1d_fp16 --out /tmp/moves.json

Without KEGEN_SUITE_SCALE the shapes are the production sizes (an evaluation takes 1-3 minutes on
an idle core). Results at another scale are not production results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kegen.eval import EvalConfig, evaluate  # noqa: E402
from kegen.profiling.schema import Profile  # noqa: E402
from kegen.search.operators.mutations.blocks import find_blocks  # noqa: E402
from kegen.search.operators.mutations.knobs import launch_options_of  # noqa: E402
from kegen.search.operators.mutations.plans import plan_mutations  # noqa: E402

SUITE = ROOT / "kegen" / "suites" / "production"
DEFAULT = "linear_bias_gelu_bf16,conv1d_fp16,conv2d_fp16,attention_fwd_fp16,gemm_bf16_4096"


def _row(problem: str, move: str, source: str, result: Any, wall_s: float) -> dict[str, Any]:
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    return {
        "problem": problem,
        "move": move,
        "status": data.get("status"),
        "time_us": (data.get("candidate_time_s") or 0.0) * 1e6,
        "roofline": data.get("fitness"),
        "blocks": {s.param: s.value for s in find_blocks(source)},
        "options": launch_options_of(source),
        "message": (data.get("message") or "")[:300],
        "wall_s": round(wall_s, 1),
        "profile": data.get("profile"),
    }


def run(problem: str, config: EvalConfig) -> list[dict[str, Any]]:
    """The seed's row, then one row per plan move generated from the seed's profile."""
    path = SUITE / problem / "problem.py"
    seed = (SUITE / problem / "seed.py").read_text()
    t0 = time.monotonic()
    res = evaluate(path, seed, config=config)
    rows = [_row(problem, "seed", seed, res, time.monotonic() - t0)]
    prof = rows[0].pop("profile")
    if not prof:
        return rows
    for m in plan_mutations(seed, Profile.from_dict(prof)):
        code = m.apply(seed)
        t0 = time.monotonic()
        row = _row(problem, m.name, code, evaluate(path, code, config=config), time.monotonic() - t0)
        row.pop("profile")
        rows.append(row)
        _print(row)
    return rows


def _print(row: dict[str, Any]) -> None:
    frac = f"{row['roofline']:.1%}" if row["roofline"] else "-"
    print(
        f"{row['problem']:24} {row['move'][:60]:60} {row['status']:14} {row['time_us']:9.2f} us {frac:>7}"
        f"  ({row['wall_s']} s)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default=DEFAULT, help="comma-separated production problem names")
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    config = EvalConfig(target="mtia", trials=1)
    scale = os.environ.get("KEGEN_SUITE_SCALE", "1")
    rows: list[dict[str, Any]] = []
    for problem in args.problems.split(","):
        got = run(problem.strip(), config)
        _print(got[0])
        rows.extend(got)
    if args.out:
        args.out.write_text(
            json.dumps({"scale": scale, "machine": config.machine, "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
