"""Native-dtype eager and torch.compile baselines for the production suite on a GPU.

The production problems' references upcast fp16/bf16 operands to float32 (`x.float()`) so that the
PyTorch reference is exact and fast on a CPU host (fp16 matmul on CPUs is ~40x slower than fp32).
On a GPU that makes the reference an fp32 GEMM: a baseline no production model would run. This tool
times each problem's reference with `Tensor.float` made the identity for low-precision tensors (the
operands stay in their own dtype; cuBLAS/cuDNN accumulate in fp32), eager and under torch.compile,
with `triton.testing.do_bench` (L2 flushed, medians), next to the fp32-upcast reference, and writes
`docs/results/production_nvidia_native.{md,json}`.

    python tools/gpu_native_baselines.py [--only a,b] [--classes gemm,attention,convolution]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from kegen.eval.loader import load_problem
from kegen.suites import find_suite

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def native_float() -> Iterator[None]:
    """`t.float()` returns `t` itself for fp16/bf16 tensors (a production model's native dtype)."""
    orig = torch.Tensor.float

    def keep(self: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
        return self if self.dtype in (torch.float16, torch.bfloat16) else orig(self, *a, **k)

    torch.Tensor.float = keep  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.Tensor.float = orig  # type: ignore[method-assign]


def bench(fn: Any, inputs: list[Any]) -> float:
    from triton.testing import do_bench

    return float(do_bench(lambda: fn(*inputs), warmup=25, rep=200)) * 1e-3  # seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--classes", default="gemm,attention,convolution")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "production_nvidia_native"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: this tool times CUDA baselines", file=sys.stderr)
        return 2
    suite = find_suite("production").problems
    classes = set(args.classes.split(","))
    only = set(filter(None, args.only.split(",")))
    rows = []
    for p in suite:
        if (only and p.name not in only) or (not only and p.op_class not in classes):
            continue
        prob = load_problem(p.problem_path)
        with torch.device("cuda"):
            torch.manual_seed(0)
            model = prob.model_cls(*prob.get_init_inputs()).cuda()
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
        row: dict[str, Any] = {"problem": p.name, "op_class": p.op_class, "dtype": p.dtype}
        try:
            row["upcast_eager_s"] = bench(model, inputs)
            with native_float():
                row["native_eager_s"] = bench(model, inputs)
                torch._dynamo.reset()
                compiled = torch.compile(model)
                row["native_compile_s"] = bench(compiled, inputs)
        except Exception as exc:  # noqa: BLE001 - recorded per problem
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    Path(args.out + ".json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    lines = [f"# Native-dtype baselines on {env['device']} (torch {env['torch']})", "",
             "`tools/gpu_native_baselines.py`: the reference with fp16/bf16 operands kept in their dtype",
             "(`Tensor.float` the identity for them), eager and torch.compile, `triton.testing.do_bench`",
             "medians; `upcast eager` is the suite's reference as written (fp32 compute).", "",
             "| problem | upcast eager us | native eager us | native compile us |", "|---|---|---|---|"]
    for r in rows:
        keys = ("upcast_eager_s", "native_eager_s", "native_compile_s")
        cells = [f"{r[k] * 1e6:.1f}" if k in r else "-" for k in keys]
        err = f" ({r['error']})" if "error" in r else ""
        lines.append(f"| {r['problem']} | " + " | ".join(cells) + err + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
