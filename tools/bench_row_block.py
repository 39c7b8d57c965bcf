"""The one-block-per-row move on row kernels: the seed vs the rewritten seed (vs + num_stages=2).

For each problem folder (problem.py + seed.py), evaluates on the simulated MTIA (`kegen eval
--json`, one trial): the seed, the seed rewritten by `kegen.search.operators.mutations.rows`, and
that rewrite with multi-buffering (`num_stages=2`, the plan move's launch option) and with both
cores of each PE running programs (`dual_core=True`). Prints a table
(simulated time, roofline time, fraction of the roofline, DRAM bytes, top stalls) and one JSON
object. Shapes follow KEGEN_SUITE_SCALE (unset: full size, ~1-3 min per evaluation on one core).

    .venv/bin/python tools/bench_row_block.py kegen/suites/production/layer_norm_bf16 \
        kegen/suites/production/rms_norm_fp16 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kegen.search.operators.mutations import find_knobs, set_knob
from kegen.search.operators.mutations.rows import row_mutations

ROOT = Path(__file__).resolve().parents[1]


OPTIONS = {"stages2": ("num_stages", 2), "dual_core": ("dual_core", True)}


def _with_option(source: str, kernel: str, name: str, value: object) -> str:
    for knob in find_knobs(source, launch_options=True):
        if knob.option and knob.name == name and knob.kernel == kernel:
            return set_knob(source, knob, value)
    return source


def variants(seed: str) -> dict[str, str]:
    """seed, row_block (the move) and row_block+OPTION for each launch option in OPTIONS
    (multi-buffering; both cores of each PE running programs)."""
    muts = row_mutations(seed)
    if not muts:
        raise SystemExit("the one-block-per-row move does not apply to this seed")
    rows = muts[0].apply(seed)
    out = {"seed": seed, "row_block": rows}
    for label, (name, value) in OPTIONS.items():
        code = _with_option(rows, muts[0].kernel, name, value)
        if code != rows:
            out[f"row_block+{label}"] = code
    return out


def evaluate(problem: Path, code: str) -> dict[str, Any]:
    """`kegen eval --json` of `code` against `problem` (seed.py as the baseline)."""
    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "candidate.py"
        cand.write_text(code)
        cmd = [str(ROOT / ".venv/bin/kegen"), "eval", str(problem), str(cand), "--target", "mtia"]
        proc = subprocess.run(
            [*cmd, "--trials", "1", "--json", "--timeout", "1200"], capture_output=True, text=True
        )
    try:
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        return {"status": "error", "message": (proc.stderr or proc.stdout)[-2000:]}


def summary(r: dict[str, Any]) -> dict[str, Any]:
    prof = r.get("profile") or {}
    metrics = prof.get("metrics") or {}
    t, roof = r.get("candidate_time_s"), r.get("roofline_time_s")
    return {
        "status": r.get("status"),
        "message": (r.get("message") or "")[:300],
        "candidate_time_s": t,
        "roofline_time_s": roof,
        "roofline_fraction": roof / t if t and roof else None,
        "dram_bytes": metrics.get("dram_bytes"),
        "sram_bytes": metrics.get("sram_bytes"),  # re-reads served by the SRAM cache (sram_mode=cache)
        "dram_excess": metrics.get("dram_excess"),
        "stall_shares": dict(list((prof.get("stall_shares") or {}).items())[:4]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", type=Path, help="problem folders (problem.py + seed.py)")
    ap.add_argument("--json", type=Path, help="also write the JSON here")
    ap.add_argument("--only", nargs="*", help="evaluate only these variants (seed, row_block, row_block+...)")
    args = ap.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    for folder in args.problems:
        seed = (folder / "seed.py").read_text()
        for name, code in variants(seed).items():
            if args.only and name not in args.only:
                continue
            s = summary(evaluate(folder / "problem.py", code))
            results.setdefault(folder.name, {})[name] = s
            frac = s["roofline_fraction"]
            t = s["candidate_time_s"]
            print(
                f"{folder.name:24s} {name:18s} {s['status']:10s} "
                f"time {t * 1e6 if t else float('nan'):9.1f} us  roofline "
                f"{frac * 100 if frac else float('nan'):5.1f}%  dram x{s['dram_excess']}  "
                f"{s['stall_shares']}",
                flush=True,
            )
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
