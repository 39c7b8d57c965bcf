"""Sweep the FlashAttention template's configurations on a GPU against torch's own attention.

The kernel is `kegen/search/operators/templates/gpu_attention.py`'s text (read from the file, so the
script needs only torch and Triton: it runs on a bare device image). Times are
`triton.testing.do_bench` medians (L2 cleared between calls) of the production attention shape
(2 x 8 heads x 1024 x 64, fp16, no mask) unless --shape says otherwise; the baselines are
`F.scaled_dot_product_attention` and torch.compile of the reference written in fp16. Every
configuration runs with the online softmax and with the fixed per-row reference (`fixed`, D88); the
fixed rows are also checked on keys that force their fallback (scores growing along the row), whose
time is reported as `fallback us`.

  python tools/bench_gpu_attention_configs.py [--shape B,H,S,D] [--ws] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import sys
import tempfile
from functools import partial
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1] / "kegen/search/operators/templates/gpu_attention.py"


def _kernel_source() -> str:
    """The template's `_KERNEL` text, as a module with its imports."""
    tree = ast.parse(TEMPLATE.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_KERNEL" for t in node.targets):
            return "import triton\nimport triton.language as tl\n" + ast.literal_eval(node.value)
    raise SystemExit(f"no _KERNEL in {TEMPLATE}")


WS_LOOP = "for start in tl.range(0, hi, BLOCK_N, warp_specialize=True):"


def _load_kernel(warp_specialize: bool = False):  # noqa: ANN202 - a Triton JITFunction
    """The template's kernel; with `warp_specialize`, its key loop as a warp-specialized tl.range."""
    import importlib.util

    source = _kernel_source()
    if warp_specialize:
        source = source.replace("for start in range(0, hi, BLOCK_N):", WS_LOOP)
        assert WS_LOOP in source
    path = Path(tempfile.mkdtemp()) / f"attention_template_{int(warp_specialize)}.py"  # jit needs a file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("attention_template", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention_fwd_kernel


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="2,8,1024,64", help="batch,heads,seq,head_dim")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--ws", action="store_true", help="also sweep warp-specialized key loops")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    import triton
    from triton.testing import do_bench

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    batch, heads, seq, head_dim = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(batch, heads, seq, head_dim, dtype=torch.float16, device="cuda") for _ in range(3))
    scale = head_dim**-0.5
    ref = F.scaled_dot_product_attention(q, k, v)

    def eager_fp16(q, k, v):  # noqa: ANN001, ANN202 - the reference in its operands' dtype
        return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale, dim=-1), v)

    compiled = torch.compile(eager_fp16)
    rows: list[dict[str, object]] = [
        {"name": "sdpa", "us": do_bench(lambda: F.scaled_dot_product_attention(q, k, v)) * 1e3},
        {"name": "compile(fp16 reference)", "us": do_bench(lambda: compiled(q, k, v)) * 1e3},
    ]
    kernels = {ws: _load_kernel(ws) for ws in ((False, True) if args.ws else (False,))}
    out = torch.empty_like(q)
    qk_scale = scale * 1.4426950408889634
    # keys whose scores grow along the row: the first block's max is far below the row's (fallback)
    ramp = torch.linspace(0.0, 400.0, seq, device="cuda", dtype=torch.float32)[:, None]
    q_ramp = torch.ones_like(q)
    k_ramp = (ramp / head_dim).half().expand(batch, heads, seq, head_dim).contiguous()
    ref_ramp = F.scaled_dot_product_attention(q_ramp, k_ramp, v)
    sweep = itertools.product(tuple(kernels), (False, True), (64, 128), (32, 64, 128), (4, 8), (2, 3, 4))
    for ws, fixed, bm, bn, warps, stages in sweep:
        if seq % bm or seq % bn:
            continue
        launch = kernels[ws][(triton.cdiv(seq, bm), batch * heads)]
        opts = dict(
            seq=seq,
            qk_scale=qk_scale,
            HEAD_DIM=head_dim,
            BLOCK_D=head_dim,
            BLOCK_M=bm,
            BLOCK_N=bn,
            CAUSAL=False,
            EVEN=True,
            FIXED=fixed,
            num_warps=warps,
            num_stages=stages,
        )
        call = partial(launch, q, k, v, out, **opts)
        name = f"{bm}x{bn} w{warps} s{stages}" + (" ws" if ws else "") + (" fixed" if fixed else "")
        row: dict[str, object] = {"name": name}
        try:
            call()
            torch.cuda.synchronize()
            err = (out.float() - ref.float()).abs().max().item()
            row.update(us=do_bench(call) * 1e3, max_abs_error=err, ok=err < 2e-2)
            if fixed:
                slow = partial(launch, q_ramp, k_ramp, v, out, **opts)
                slow()
                torch.cuda.synchronize()
                ramp_err = (out.float() - ref_ramp.float()).abs().max().item()
                row.update(fallback_us=do_bench(slow) * 1e3, fallback_error=ramp_err)
                row["ok"] = bool(row["ok"]) and ramp_err < 2e-2
        except Exception as exc:  # noqa: BLE001 - an out-of-resources configuration is a row, not a stop
            rows.append({"name": name, "error": f"{type(exc).__name__}: {str(exc)[:120]}"})
            continue
        rows.append(row)
    sdpa, comp = rows[0]["us"], rows[1]["us"]
    best = min((r for r in rows[2:] if r.get("ok")), key=lambda r: r["us"], default=None)  # type: ignore[arg-type,return-value]
    for r in rows:
        if "us" in r:
            extra = f"  err {r['max_abs_error']:.1e}" if "max_abs_error" in r else ""
            if "fallback_us" in r:
                extra += f"  fallback {r['fallback_us']:.2f} us err {r['fallback_error']:.1e}"
            ratios = f"vs compile {comp / r['us']:.3f}x  vs sdpa {sdpa / r['us']:.3f}x"
            print(f"{r['name']:>24}  {r['us']:8.2f} us  {ratios}{extra}")
        else:
            print(f"{r['name']:>24}  {r['error']}")
    if best is not None:
        print(
            f"best: {best['name']} {best['us']:.2f} us = {comp / best['us']:.3f}x of compile, "
            f"{sdpa / best['us']:.3f}x of sdpa ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
            f"triton {triton.__version__}, shape {args.shape})"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "shape": args.shape,
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
