"""`kegen report RUN`: render a search run (fitness over time, search tree, best kernel's profile)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run directory (with run.json) or run id in --db; or a `kegen bench` "
                        "output folder / results.json (prints its targets table)")
    parser.add_argument(
        "--db", type=Path, help="graph store (default: the run directory's, else $KEGEN_HOME/search.db)"
    )
    parser.add_argument(
        "--out", type=Path, help="where to write report.html and plots (default: the run directory)"
    )
    parser.add_argument("--text-only", action="store_true", help="print the text summary, write no HTML")


def run(args: argparse.Namespace) -> int:
    from kegen.bench.cli_report import bench_results_path, print_bench_report
    from kegen.report import locate_run, write_report
    from kegen.report.text import text_report

    bench_json = bench_results_path(Path(args.run))
    if bench_json is not None:  # a `kegen bench` folder or results.json: its targets table
        return print_bench_report(bench_json)
    try:
        store, run_id, run_dir = locate_run(args.run, args.db)
        print(text_report(store, run_id))
        if not args.text_only:
            html = write_report(store, run_id, Path(args.out or run_dir))
            print(f"\nHTML report: {html}")
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"kegen report: {exc}", file=sys.stderr)
        return 1
    return 0
