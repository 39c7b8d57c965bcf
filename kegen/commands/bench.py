"""`kegen bench SUITE`: evaluate every seed of a suite, search each problem, report the suite's numbers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kegen.executor.cli import add_executor_arguments, check_executor_arguments
from kegen.targets import TARGETS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", nargs="?", default=None, help="a suite name (default, production) or a "
                        "folder of <problem>/problem.py + seed.py")
    parser.add_argument("--suite", dest="suite_option", default=None, metavar="SUITE",
                        help="the suite, as an option (same as the positional argument)")
    parser.add_argument("--target", default="mtia", choices=TARGETS,
                        help="where kernels run (default: mtia, the simulator)")
    parser.add_argument("--machine", default=None,
                        help="machine description for mtia (default: KEGEN_MACHINE or mtia-2i)")
    parser.add_argument("--budget", type=int, default=4, help="search evaluations per problem (0: eval only)")
    parser.add_argument("--jobs", type=int, default=1, help="evaluations run at the same time")
    parser.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    parser.add_argument("--no-search", action="store_true", help="evaluate the seeds only")
    parser.add_argument("--search-time-limit", type=float, default=None, metavar="S",
                        help="stop each problem's search after S seconds")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help="start no new problem after S seconds (the rest are named in the notes)")
    parser.add_argument("--eval-timeout", type=float, default=None, metavar="S",
                        help="time limit of one evaluation (default: KEGEN_EVAL_TIMEOUT_S)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: runs/bench-<timestamp>)")
    parser.add_argument("--compare", type=Path, default=None, metavar="RESULTS_JSON",
                        help="an earlier run's results.json: print what changed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-compile-baseline", action="store_true",
                        help="on mtia, do not time torch.compile per problem (no 'vs compile' column)")
    add_executor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kegen.bench.plot import plot_report
    from kegen.bench.results import compare, format_changes, load_json, write_csv, write_json
    from kegen.bench.runner import BenchConfig, default_out_dir, run_bench
    from kegen.bench.table import format_summary, format_table
    from kegen.settings import load_settings, select_machine
    from kegen.suites import SuiteError

    out_dir: Path = args.out or default_out_dir()
    previous = load_json(args.compare) if args.compare else None
    if args.suite and args.suite_option and args.suite != args.suite_option:
        print(f"kegen bench: two suites given ({args.suite}, --suite {args.suite_option}); give one",
              file=sys.stderr)
        return 2
    suite = args.suite or args.suite_option
    if not suite:
        print("kegen bench: give a suite: `kegen bench default`, `kegen bench --suite production` "
              "or a folder",
              file=sys.stderr)
        return 2
    try:
        check_executor_arguments(args)
        machine = select_machine(args.machine) if args.target == "mtia" \
            else args.machine or load_settings().sim.machine
        config = BenchConfig(
            suite=suite, target=args.target, machine=machine,
            budget=args.budget, jobs=args.jobs,
            problems=tuple(p.strip() for p in args.problems.split(",") if p.strip()),
            search=not args.no_search and args.budget > 0, search_time_limit_s=args.search_time_limit,
            time_limit_s=args.time_limit, eval_timeout_s=args.eval_timeout, out_dir=out_dir,
            progress=not args.no_progress, executor=args.executor, ray_address=args.ray_address,
            compile_baseline=not args.no_compile_baseline,
        )
        report = run_bench(config)
    except (SuiteError, ValueError, RuntimeError) as exc:
        print(f"kegen bench: {exc}", file=sys.stderr)
        return 2
    print(format_table(report))
    print()
    print(format_summary(report))
    json_path = write_json(report, out_dir / "results.json")
    csv_path = write_csv(report, out_dir / "results.csv")
    plot_path = plot_report(report, out_dir / "speedups.png")
    print(f"\nwrote {json_path}, {csv_path}, {plot_path}")
    if previous is not None:
        print(f"\nchanges since {args.compare}:")
        print(format_changes(compare(previous, report)))
    return 0
