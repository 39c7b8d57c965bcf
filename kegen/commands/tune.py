"""`kegen tune MODEL.py`: a whole model faster on each machine, verified at every input variant."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kegen.targets import TARGETS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", type=Path, nargs="?", help="model file (KernelBench layout; optional get_input_variants())"
    )
    parser.add_argument("--target", choices=TARGETS, help="default mtia")
    parser.add_argument(
        "--machine", help="machines, comma-separated (mtia-v1,mtia-2i,mtia-300; default mtia-2i)"
    )
    parser.add_argument("--budget", type=int, help="evaluations shared by all searches (default 8)")
    parser.add_argument("--out", type=Path, help="run directory (default kegen-runs/tune-MODEL-TIME)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue a stopped or killed run")
    parser.add_argument(
        "--retune", action="store_true", help="search again even where the library has winners"
    )
    parser.add_argument(
        "--library", type=Path, help="kernel library file (default $KEGEN_HOME/tune_library.json)"
    )
    parser.add_argument("--executor", choices=("local", "ray"), help="default local")
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on the last line"
    )


def run(args: argparse.Namespace) -> int:
    from kegen.tune import TuneError, TuneOptions, tune_file
    from kegen.tune.report import html_report, text_report

    def fail(kind: str, msg: str) -> int:
        print(f"kegen tune: {msg}", file=sys.stderr)
        if args.json:
            print(
                json.dumps(
                    {
                        "status": kind,
                        "error": msg,
                        "verified": False,
                        "variants_checked": 0,
                        "speedup_vs_compile": None,
                        "speedup_vs_eager": None,
                        "kernels": [],
                    }
                )
            )
        return 1

    model = args.model
    if model is None and args.resume is not None:
        state = args.resume / "model.txt"
        model = Path(state.read_text().strip()) if state.is_file() else None
    if model is None:
        return fail("bad_input", "give a model file (or --resume RUN_DIR)")
    # a resumed run keeps the options it started with; options given again override them
    saved = _saved_options(args.resume) if args.resume is not None else {}
    target = args.target or saved.get("target", "mtia")
    machine = args.machine or ",".join(saved.get("machines", ["mtia-2i"]))
    machines = tuple(m.strip() for m in machine.split(",") if m.strip())
    library = args.library or (Path(saved["library"]) if saved.get("library") else None)
    opts = TuneOptions(
        target=target,
        machines=machines,
        budget=args.budget if args.budget is not None else int(saved.get("budget", 8)),
        out=args.out,
        library=library,
        retune=args.retune or bool(saved.get("retune", False)),
        executor=args.executor or saved.get("executor", "local"),
    )
    try:
        report = tune_file(model, opts, resume=args.resume)
    except TuneError as exc:
        return fail(exc.kind, str(exc))
    summary = report.summary()
    (report.run_dir / "report.html").write_text(html_report(summary))
    (report.run_dir / "report.json").write_text(json.dumps(summary, indent=1))
    print(text_report(summary))
    print(f"report: {report.run_dir / 'report.html'}")
    if args.json:
        print(json.dumps(summary))
    return 0 if summary["verified"] else 1


def _saved_options(run_dir: Path) -> dict[str, Any]:
    """The options a run directory was started with (options.json; {} for runs from before it existed)."""
    path = run_dir / "options.json"
    try:
        return dict(json.loads(path.read_text())) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
