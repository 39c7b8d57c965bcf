"""A deterministic stand-in for `kegen eval` used by the search tests (no simulator).

Its cost model rewards what the real chip rewards: bigger blocks (fewer programs), fewer passes over
the row (online / one-block softmax), deeper prefetch; blocks over 1024 fail at run time. Each call
is appended to $KEGEN_FAKE_EVAL_LOG (start and end lines) so tests can check nothing is evaluated twice.
"""

from __future__ import annotations

import ast
import os
import time

from kegen.eval.request import EvalRequest
from kegen.search.fitness import Outcome
from kegen.search.store import code_hash


def cost(code: str) -> float:
    tree = ast.parse(code)
    blocks = [
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, int)
        and "BLOCK" in ast.unparse(n.targets[0])
    ]
    block = min(blocks) if blocks else 512
    if block > 1024:
        raise RuntimeError(f"local store overflow: block {block}")
    passes = code.count("for start in range")
    if passes == 0:
        block, passes = 512, 1
    stages = 2 if "num_stages=2" in code else 3 if "num_stages=3" in code else 1
    return passes * (1.0 + 64.0 / block) / (1.0 + 0.1 * (stages - 1))


def evaluate(request: EvalRequest) -> Outcome:
    code, baseline = request.code, request.baseline
    log = os.environ.get("KEGEN_FAKE_EVAL_LOG")
    h = code_hash(code)
    if log:
        with open(log, "a") as f:
            f.write(f"start {h}\n")
    seeds = os.environ.get("KEGEN_FAKE_EVAL_TIMING_SEEDS")
    if seeds:  # the run's timing seed each request carried (docs/DECISIONS.md D49)
        with open(seeds, "a") as f:
            f.write(f"{request.overrides.get('extra', {}).get('timing_seed')}\n")
    time.sleep(float(os.environ.get("KEGEN_FAKE_EVAL_SLEEP", "0")))
    try:
        t = cost(code)
    except RuntimeError as exc:
        out = Outcome(status="runtime_error", message=str(exc))
    else:
        base = cost(baseline.text) if baseline is not None else t
        bound = "memory" if "for start" in code else "latency"
        out = Outcome(
            status="ok",
            fitness=base / t,
            speedup=base / t,
            candidate_time_s=t * 1e-6,
            baseline_time_s=base * 1e-6,
            roofline_fraction=min(1.0, 0.2 / t),
            profile={
                "bound": bound,
                "time_s": t * 1e-6,
                "roofline_fraction": min(1.0, 0.2 / t),
                "utilisation": {"dma": 0.7, "simd": 0.2},
                "top_stall_reasons": [["dma_wait", 0.6], ["scalar", 0.2]],
            },
        )
    if log:
        with open(log, "a") as f:
            f.write(f"end {h}\n")
    return out
