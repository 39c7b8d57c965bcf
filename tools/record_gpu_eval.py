"""Record `kegen eval --target nvidia` on a few fixture problems (run on a machine with an NVIDIA GPU).

    PYTHONPATH=. python tools/record_gpu_eval.py --out docs/results

Writes gpu_eval_<device>.json (one EvalResult dict per case, plus the environment) and a .txt with
each verdict and profile as `kegen eval` prints them. Also runs the GPU-only hostile fixture
(work on a side stream), which must come back cheat_detected.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kegen.eval import EvalConfig, evaluate  # noqa: E402
from kegen.eval.profile import Profile  # noqa: E402
from kegen.profiling.render import terminal  # noqa: E402

FIX = ROOT / "tests" / "eval" / "fixtures"
CASES = [  # (problem, candidate, expected status)
    ("vector_add_gpu", "vector_add_ok", "ok"),
    ("softmax_large", "softmax_ok", "ok"),
    ("matmul_large", "matmul_ok", "ok"),
    ("vector_add_gpu", "cheat_side_stream", "cheat_detected"),
    ("vector_add_gpu", "cheat_library_op", "cheat_detected"),
]


def environment() -> dict[str, str]:
    import torch
    import triton

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "cuda": str(torch.version.cuda),
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    ap.add_argument("--ncu", action="store_true", help="also collect ncu metrics (mode profile)")
    ap.add_argument("--only", nargs="*", default=None, help="problem names to run")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    records, text = [], [f"kegen eval --target nvidia on {env['device']} ({json.dumps(env)})", ""]
    for prob, cand, expected in CASES:
        if args.only and prob not in args.only:
            continue
        config = EvalConfig(target="nvidia", timeout_s=400, extra={"ncu": bool(args.ncu)})
        t0 = time.time()
        try:
            result = evaluate(
                FIX / "problems" / f"{prob}.py",
                FIX / "candidates" / f"{cand}.py",
                config=config,
                mode="profile" if args.ncu else "eval",
            )
            data = result.to_dict()
            block = result.verdict_text()
            inclusive = (result.details.get("timing") or {}).get("host_inclusive")
            if inclusive:
                block += (
                    f"\n  candidate with host launch overhead (do_bench style): "
                    f"{inclusive['median_s'] * 1e6:.2f} us"
                )
            if result.profile:
                block += "\n" + terminal(Profile.from_dict(result.profile), full=True)
        except Exception as exc:  # record and go on: the file says what failed
            data = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
            block = f"error: {data['message']}"
        data.update(problem=prob, candidate=cand, expected=expected, host_wall_s=time.time() - t0)
        records.append(data)
        text += [f"$ kegen eval {prob}.py {cand}.py --target nvidia   (expected: {expected})", block, ""]
        print("\n".join(text[-3:]), flush=True)
    name = "gpu_eval_" + env["device"].split()[-1].lower().replace("/", "_")
    (out / f"{name}.json").write_text(json.dumps({"environment": env, "results": records}, indent=1))
    (out / f"{name}.txt").write_text("\n".join(text))
    print(f"wrote {out / name}.json and .txt")
    return 0 if all(r.get("status") == r["expected"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
