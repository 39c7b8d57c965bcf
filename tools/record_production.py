"""Record the production suite on mtia (issue 18): offline search per problem, targets table, gaps.

Resumable for machines with a per-command time limit: each problem's result is written to
`<work-dir>/<problem>/result.json` as soon as its search ends (or is cut by the deadline, then
continued by the next command), and `docs/results/production_mtia.{md,json}` are rewritten from
every recorded problem at the end of each command.

    # locally, two problems with a small budget:
    python tools/record_production.py --only gemm_fp16_512,rms_norm_fp16 --budget 4 --jobs 2

    # one 10-minute command on a 16-core host; repeat until the Markdown's notes list no problem:
    python tools/record_production.py --jobs 16 --budget 50 --skip-done --deadline 540 \
        --archive production_mtia_state.tar.gz

The mtia target needs its extras (`pip install -e '.[mtia]'`: unicorn, llvmlite, lark, ml_dtypes,
pyelftools) and LLVM's `llvm-mc` (or `$KEGEN_LLVM_MC`); the tool checks both first and exits 2 in
seconds, naming what is missing. On a host without llvm-mc (the device machine), carry the archive
`tools/carry_llvm_mc.sh` packs (its header says how to unpack it and set `$KEGEN_LLVM_MC`). Side by
side (`--problems-at-once`), the searches' workers share the cores: each gets cores // --jobs threads.
On a GPU host it hides the GPUs (CUDA_VISIBLE_DEVICES="") so that
the mtia driver is Triton's active one. `--archive PATH` restores the work folder from PATH when
it is missing and packs it there at the end, or when the process gets SIGTERM (a command's
`timeout`): on a machine that starts bare, carry that one file from one command to the next (it
holds the search stores, so partial searches resume; a kill loses only evaluations in flight).
`--compile-baselines` measures torch.compile where a record lacks it (cut by a deadline, or failed
on the recording host), without searching again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# The mtia driver is Triton's active one only where torch sees no GPU: hide the GPUs of a GPU host
# before torch is imported (`--keep-gpus` leaves them visible).
if "--keep-gpus" not in sys.argv:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

from kegen.bench.markdown import format_markdown  # noqa: E402
from kegen.bench.record import (  # noqa: E402
    RecordConfig,
    assemble,
    complete_compile_baselines,
    pack,
    pack_on_terminate,
    record,
    unpack,
)
from kegen.bench.results import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"


def keep_best_kernels(data: dict, folder: Path) -> int:
    """Copy each searched problem's best kernel beside the record (`<out>_kernels/<problem>.py`), so the
    figures can be re-checked after the work folder is gone; how many were copied."""
    kept = 0
    for p in data.get("problems", []):
        src = Path(p.get("best_path") or "")
        if p.get("best_source") == "search" and src.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{p['name']}.py").write_text(src.read_text())
            kept += 1
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="production")
    ap.add_argument("--machine", default="mtia-2i")
    ap.add_argument("--budget", type=int, default=50,
                    help="search evaluations per problem (after the seed's)")
    ap.add_argument("--jobs", type=int, default=1, help="evaluations at the same time (cores to use)")
    ap.add_argument("--problems-at-once", type=int, default=1,
                    help="searches side by side, sharing --jobs (default 1: one problem after another)")
    ap.add_argument("--only", default="", help="comma-separated problem names (default: the whole suite)")
    ap.add_argument("--skip-done", action="store_true", help="leave problems recorded as done alone")
    ap.add_argument("--deadline", type=float, default=None, metavar="S",
                    help="this command's time: searches stop in time, no problem starts too late")
    ap.add_argument("--drain", type=float, default=120.0, metavar="S",
                    help="kept free before the deadline for evaluations in flight (default 120)")
    ap.add_argument("--eval-timeout", type=float, default=None, metavar="S", help="one evaluation's limit")
    ap.add_argument("--no-compile-baseline", action="store_true", help="skip torch.compile on mtia")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "production-mtia")
    ap.add_argument("--archive", type=Path, default=None,
                    help="a .tar.gz of the work folder: restored from when missing, written at the end")
    ap.add_argument("--out", type=Path, default=RESULTS / "production_mtia",
                    help="output path without suffix (.md and .json are written)")
    ap.add_argument("--assemble-only", action="store_true",
                    help="only rewrite the .md/.json from the records")
    ap.add_argument("--compile-baselines", action="store_true",
                    help="only measure torch.compile where a record lacks it (failed or cut), then rewrite")
    ap.add_argument("--keep-gpus", action="store_true", help="leave CUDA devices visible (not for mtia)")
    ap.add_argument("--note", default="", help="a paragraph put at the top of the Markdown record")
    args = ap.parse_args(argv)
    if not args.assemble_only:
        missing = preflight()
        if missing:
            print("record_production: the mtia target cannot run here:\n  " + "\n  ".join(missing),
                  file=sys.stderr)
            return 2

    started = time.monotonic()
    if args.archive is not None and unpack(args.archive, args.work_dir):
        print(f"restored {args.work_dir} from {args.archive}")
    cfg = RecordConfig(
        work_dir=args.work_dir, suite=args.suite, machine=args.machine, budget=args.budget,
        jobs=args.jobs, problems_at_once=args.problems_at_once,
        only=tuple(n.strip() for n in args.only.split(",") if n.strip()), skip_done=args.skip_done,
        deadline_s=args.deadline, drain_s=args.drain, eval_timeout_s=args.eval_timeout,
        compile_baseline=not args.no_compile_baseline,
    )
    if args.archive is not None and not args.assemble_only:
        pack_on_terminate(cfg.work_dir, args.archive)
    log = lambda msg: print(f"[{time.monotonic() - started:6.0f} s] {msg}", flush=True)  # noqa: E731
    if args.compile_baselines:
        complete_compile_baselines(cfg, log=log)
    elif not args.assemble_only:
        record(cfg, log=log)
    report = assemble(cfg)
    given = argv if argv is not None else sys.argv[1:]
    command = "python tools/record_production.py " + " ".join(
        a for i, a in enumerate(given) if a != "--note" and (i == 0 or given[i - 1] != "--note"))
    preamble = (
        f"Rewritten by `{command}` from the per-problem records in `{_rel(cfg.work_dir)}/<problem>/"
        f"result.json` (offline operator, budget {cfg.budget} search evaluations per problem after the "
        f"seed's, machine {cfg.machine}). "
        f"Host: {report.host.get('cores', '?')} cores, Python {report.host.get('python', '?')}. "
        "Times are simulated "
        "device times of one forward; x seed = seed time / best time; vs compile = torch.compile's time "
        "(Inductor's kernels lowered for mtia) / best time; roofline = roofline time / best time; evals->90% "
        "= evaluations after the seed's until the best so far reached 90% of the final best."
    )
    if args.note:
        preamble = args.note.strip() + "\n\n" + preamble
    title = f"{cfg.suite} suite on mtia ({cfg.machine}): targets"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md = args.out.with_suffix(".md")
    md.write_text(format_markdown(report, title, preamble))
    js = write_json(report, args.out.with_suffix(".json"))
    data = json.loads(js.read_text())
    data["command"] = command
    js.write_text(json.dumps(data, indent=2) + "\n")
    kept = keep_best_kernels(data, args.out.parent / (args.out.name + "_kernels"))
    if kept:
        print(f"kept {kept} best kernels in {args.out.name}_kernels/")
    if args.archive is not None and args.work_dir.is_dir():
        pack(args.work_dir, args.archive)
        print(f"packed {args.work_dir} into {args.archive}")
    print(md.read_text())
    print(f"wrote {md} and {js} in {time.monotonic() - started:.0f} s")
    return 0


def preflight() -> list[str]:
    """What the mtia target lacks on this host (empty: ready): its Python packages, LLVM's llvm-mc
    and an active mtia Triton driver. Checked first so a remote command fails in seconds."""
    import importlib

    problems = []
    for module, package in (("unicorn", "unicorn==2.1.4"), ("llvmlite", "llvmlite==0.50.0"), ("lark", "lark"),
                            ("ml_dtypes", "ml_dtypes"), ("elftools", "pyelftools")):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            problems.append(f"python package {package} ({exc}): pip install -e '.[mtia]' or carry its wheel")
    try:
        from lowering.codegen.assembler import llvm_mc

        llvm_mc()
    except Exception as exc:
        problems.append(f"llvm-mc: {exc}")
    try:
        from lowering.backend.driver import MtiaDriver

        if not MtiaDriver.is_active():
            problems.append("the mtia Triton driver is not active (torch sees a GPU): drop --keep-gpus")
    except Exception as exc:
        problems.append(f"the mtia backend does not import: {type(exc).__name__}: {exc}")
    return problems


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
