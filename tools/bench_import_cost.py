"""What kegen adds to `python -c "import triton"` (its backend is a `triton.backends` entry point).

    .venv/bin/python tools/bench_import_cost.py [--runs 21] [--json] [--out docs/results/import_cost.json]

Runs, alternately, `runs` fresh interpreters of each variant and reports the median wall time:
- `with`: `import triton` as installed (Triton imports `lowering.backend.compiler` and `.driver`);
- `without`: the same interpreter with kegen's entry points (every `triton.backends` entry whose
  module is in `lowering` or `kegen`: the mtia backend and the Inductor cpu backend) filtered out of
  `importlib.metadata.entry_points()` before `import triton` (a shim run in both variants, so both
  pay for it), i.e. Triton as if kegen were not installed.
Also lists the kegen modules (`kegen`, `lowering`, `mtia_sim`) and heavy third-party modules
(lark, unicorn, llvmlite, torch, ml_dtypes) that `import triton` loads, and whether
`import mtia_sim.isa` loads Unicorn. The target: with / without <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SHIM = """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)
import importlib.metadata as md
_orig = md.entry_points
def _filtered(**kw):
    eps = _orig()
    items = [e for g in eps.values() for e in g] if hasattr(eps, "values") else list(eps)
    ours = lambda e: e.group == "triton.backends" and e.value.split(".")[0] in ("lowering", "kegen")
    kept = md.EntryPoints(e for e in items if not ({drop} and ours(e)))
    return kept.select(**kw) if kw else kept
md.entry_points = _filtered
"""
OURS = ("kegen", "lowering", "mtia_sim")
HEAVY = ("lark", "unicorn", "llvmlite", "torch", "ml_dtypes", "elftools")


def _code(drop: bool, body: str) -> str:
    return SHIM.format(drop=drop) + body


def _time_once(drop: bool) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _code(drop, "import triton")], check=True)
    return time.perf_counter() - start


def _modules(body: str, drop: bool = False) -> list[str]:
    probe = body + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    cmd = [sys.executable, "-c", _code(drop, probe)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(runs: int) -> dict[str, Any]:
    _time_once(False), _time_once(True)  # warm the file cache
    with_s: list[float] = []
    without_s: list[float] = []
    for _ in range(runs):
        with_s.append(_time_once(False))
        without_s.append(_time_once(True))
    mods = _modules("import triton")
    ours = [m for m in mods if m.split(".")[0] in OURS]
    heavy = sorted({m.split(".")[0] for m in mods if m.split(".")[0] in HEAVY})
    baseline = {m.split(".")[0] for m in _modules("import triton", drop=True) if m.split(".")[0] in HEAVY}
    isa = _modules("import mtia_sim.isa")
    return {
        "runs": runs,
        "with_median_s": statistics.median(with_s),
        "without_median_s": statistics.median(without_s),
        "ratio": statistics.median(with_s) / statistics.median(without_s),
        "kegen_modules_imported": len(ours),
        "kegen_modules": ours,
        "heavy_modules_added": sorted(set(heavy) - baseline),
        "mtia_sim_isa_imports_unicorn": "unicorn" in {m.split(".")[0] for m in isa},
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--json", action="store_true", help="print the JSON record instead of a summary")
    ap.add_argument("--out", type=Path, help="also write the JSON record to this file")
    args = ap.parse_args(argv)
    rec = measure(args.runs)
    if args.out:
        args.out.write_text(json.dumps(rec, indent=1) + "\n")
    if args.json:
        print(json.dumps(rec, indent=1))
    else:
        print(
            f"import triton: {rec['with_median_s'] * 1e3:.0f} ms with kegen, "
            f"{rec['without_median_s'] * 1e3:.0f} ms without (median of {rec['runs']}), "
            f"ratio {rec['ratio']:.2f} (target <= 1.2)\n"
            f"kegen modules imported: {rec['kegen_modules_imported']}; heavy modules added: "
            f"{', '.join(rec['heavy_modules_added']) or 'none'}; "
            f"import mtia_sim.isa loads unicorn: {rec['mtia_sim_isa_imports_unicorn']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
