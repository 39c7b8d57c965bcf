"""The memory-bound moves of issue 26 on the simulated MTIA: seed -> moves, per production problem.

For each problem a chain of variants is built by applying the offline operator's moves to the
suite's seed (no search, no noise): the embedding bags' segment gather (mutations/embedding.py)
and its bag group; attention's exp2 / folded scale (mutations/attention.py) with dual core and
128-wide blocks; the norms' one-block-per-row (mutations/rows.py) then rows per program in a
software-pipelined row loop (mutations/memory/norms.py); jagged softmax's vectorized loop, its
row-block loops staged (num_stages=2, mutations/memory/norms.py) and dual core. Also a drafted
nn.EmbeddingBag(mode="mean") problem with offsets (the template draft of drafting/gather.py).
Every variant is evaluated (correctness against PyTorch, simulated time, roofline fraction =
roofline time / time).

Resumable: results go to `--out` (JSON) after every evaluation; a rerun skips the (problem,
variant) pairs already there. Prints a table at the end.

    .venv/bin/python tools/bench_memory_moves.py --jobs 12 --out runs/memory_moves.json       # full size
    .venv/bin/python tools/bench_memory_moves.py --problems embedding_bag_sum_fp16 --jobs 1
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations import vectorize_mutations
from kegen.search.operators.mutations.knobs import apply_launch_options
from kegen.search.operators.mutations.memory.attention import attention_mutations
from kegen.search.operators.mutations.memory.embedding import embedding_mutations
from kegen.search.operators.mutations.memory.norms import norm_mutations
from kegen.search.operators.mutations.rows import row_mutations
from kegen.suites import find_suite

DRAFTED = "embedding_bag_drafted_mean"
DRAFTED_PROBLEM = '''"""nn.EmbeddingBag(mode="mean") with offsets: 65536 x 64 fp32, 4096 bags of 0..63."""
import torch
import torch.nn as nn

NUM, DIM, BAGS = 65536, 64, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(NUM, DIM, mode="mean")

    def forward(self, indices, offsets):
        return self.bag(indices, offsets)


def get_inputs():
    lengths = torch.randint(0, 64, (BAGS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)[:-1]])
    return [torch.randint(0, NUM, (int(lengths.sum()),)), offsets]


def get_init_inputs():
    return []
'''

Step = Callable[[str], str]


def _move(finder: Callable[[str], list[Any]], name: str = "") -> Step:
    """The first move `finder` lists for the source (whose name contains `name`)."""

    def step(source: str) -> str:
        moves = [m for m in finder(source) if name in m.name]
        if not moves:
            raise ValueError(f"no move {name or finder.__name__} applies")
        return str(moves[0].apply(source))

    return step


def _const(name: str, value: int) -> Step:
    return lambda s: re.sub(rf"^{name} = \d+$", f"{name} = {value}", s, count=1, flags=re.M)


def _options(**options: Any) -> Step:
    def step(source: str) -> str:
        kernels = re.findall(r"^def (\w+)\(", source, flags=re.M)
        return apply_launch_options(source, dict.fromkeys(kernels, options))

    return step


def _attention_blocks(source: str) -> str:
    out = _const("KEY_BLOCK", 128)(source)
    return out.replace("triton.cdiv(seq, 64)", "triton.cdiv(seq, 128)").replace("BLOCK_M=64", "BLOCK_M=128")


SEGMENT = _move(embedding_mutations, "segment_gather")
ROWS = _move(row_mutations)
# (problem, variant, steps applied to the previous variant of the chain)
CHAINS: dict[str, list[tuple[str, list[Step]]]] = {
    **{
        name: [("seed", []), ("segment_gather", [SEGMENT]), ("bag_group=8", [_const("BAG_GROUP", 8)])]
        for name in ("embedding_bag_sum_fp16", "embedding_bag_mean_fp32")
    },
    "attention_fwd_fp16": [
        ("seed", []),
        ("exp2+scale_in_q", [_move(attention_mutations)]),
        ("+dual_core+128x128", [_attention_blocks, _options(dual_core=True)]),
    ],
    **{
        name: [
            ("seed", []),
            ("row_block", [ROWS]),
            ("rows_per_program+pipelined", [_move(norm_mutations, "pipelined")]),
        ]
        for name in ("layer_norm_bf16", "rms_norm_fp16", "softmax_fp32")
    },
    "jagged_softmax_fp32": [
        ("seed", []),
        ("vectorize R=32", [_move(vectorize_mutations, "32")]),
        ("row_block_stages=2", [_move(norm_mutations, "row_block_stages")]),
        ("+dual_core", [_options(dual_core=True)]),
    ],
    DRAFTED: [("template draft", [])],
}


def variants(name: str, work: Path) -> tuple[Path, list[tuple[str, str]]]:
    """The problem file and [(variant, source)] of problem `name`'s chain."""
    if name == DRAFTED:
        from kegen.search.operators.drafting import analyze

        problem = work / f"{DRAFTED}.py"
        problem.write_text(DRAFTED_PROBLEM)
        source = analyze(problem).source
        if source is None:
            raise RuntimeError("the drafter refused the EmbeddingBag problem")
        return problem, [("template draft", source)]
    (p,) = find_suite("production").select([name]).problems
    source, out = p.seed_path.read_text(), []
    for variant, steps in CHAINS[name]:
        for step in steps:
            source = step(source)
        out.append((variant, source))
    return p.problem_path, out


def measure(problem: Path, source: str, timeout: float) -> dict[str, Any]:
    cfg = EvalConfig(target="mtia", trials=1, profile=True, fresh_process=True, timeout_s=timeout)
    r = evaluate(problem, source, config=cfg)
    out: dict[str, Any] = {"status": r.status.value, "message": r.message[:300]}
    if r.status.value == "ok":
        t, roof = r.candidate_time_s, r.roofline_time_s
        out |= {"time_s": t, "roofline_time_s": roof, "roofline_fraction": roof / t if t and roof else None}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*", default=list(CHAINS), help="problems (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="evaluations at once")
    ap.add_argument("--out", type=Path, default=Path("runs/memory_moves.json"), help="results (resumable)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per evaluation")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.problems) - set(CHAINS))
    if unknown:
        ap.error(f"unknown problems {unknown}; known: {', '.join(CHAINS)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = json.loads(args.out.read_text()) if args.out.exists() else {}
    lock = threading.Lock()
    todo = []
    for name in args.problems:
        problem, chain = variants(name, args.out.parent)
        todo += [(name, v, problem, src) for v, src in chain if v not in results.get(name, {})]

    def run(item: tuple[str, str, Path, str]) -> None:
        name, variant, problem, source = item
        res = measure(problem, source, args.timeout)
        with lock:
            results.setdefault(name, {})[variant] = res
            args.out.write_text(json.dumps(results, indent=2, sort_keys=True))
            print(f"{name:28s} {variant:22s} {_row(res)}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(run, todo))
    print(f"\n{'problem':28s} {'variant':22s} {'time':>10s} {'roofline':>9s}")
    for name in args.problems:
        for variant, res in results.get(name, {}).items():
            print(f"{name:28s} {variant:22s} {_row(res)}")
    return 0


def _row(res: dict[str, Any]) -> str:
    if res.get("status") != "ok":
        return f"{res.get('status')}: {res.get('message', '')[:80]}"
    return f"{res['time_s'] * 1e6:8.2f} us {100 * (res['roofline_fraction'] or 0):8.1f}%"


if __name__ == "__main__":
    sys.exit(main())
