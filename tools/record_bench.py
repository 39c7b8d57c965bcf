#!/usr/bin/env python
"""Run a kegen bench suite and record its numbers in the repository, so regressions are visible.

Writes docs/results/bench_<YYYY-MM-DD>.json / .csv / .png (a second run on the same day gets a
_2, _3 ... suffix), appends one line to docs/results/BENCH_HISTORY.md (date, commit, machine,
pass rate, fast_1, geomean speedup, roofline fraction, wall time) and prints what changed since
the previous recorded run.

    .venv/bin/python tools/record_bench.py --budget 4 --jobs 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from kegen.bench.host import host_line
from kegen.bench.plot import plot_report
from kegen.bench.results import BenchReport, compare, format_changes, load_json, write_csv, write_json
from kegen.bench.runner import BenchConfig, run_bench
from kegen.bench.table import format_summary, format_table

REPO = Path(__file__).resolve().parents[1]
HISTORY_HEADER = (
    "# kegen bench history\n\n"
    "One line per recorded run of `tools/record_bench.py`. Speedups are over the bench's baseline "
    "(on target mtia: the problem's seed kernel); roofline is the geometric-mean fraction of the "
    "simulated roofline over correct problems. Files: `bench_<date>.json` / `.csv` / `.png`.\n\n"
    "| date (UTC) | commit | suite | target | budget | pass rate | fast_1 | geomean speedup | roofline | "
    "evals | wall | machine | results | notes |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def _stem(results_dir: Path, day: str) -> str:
    stem, n = f"bench_{day}", 2
    while (results_dir / f"{stem}.json").exists():
        stem, n = f"bench_{day}_{n}", n + 1
    return stem


def _previous(results_dir: Path) -> Path | None:
    runs = sorted(results_dir.glob("bench_*.json"), key=lambda p: p.stat().st_mtime)
    return runs[-1] if runs else None


def history_line(report: BenchReport, stem: str, note: str) -> str:
    """The BENCH_HISTORY.md table row for `report`."""
    s = report.finalize().summary
    assert s is not None
    gm = f"{s.geomean_speedup:.3f}x" if s.geomean_speedup else "-"
    roof = f"{100 * s.geomean_roofline_fraction:.2f}%" if s.geomean_roofline_fraction else "-"
    evals = sum(p.search_evaluations for p in report.problems)
    notes = "; ".join([*report.notes, *([note] if note else [])]).replace("|", "/")
    return (f"| {report.started.replace('T', ' ')} | {report.host.get('commit', '?')} | {report.suite} | "
            f"{report.target} ({report.machine}) | {report.budget} | {s.correct}/{s.problems} "
            f"({s.pass_rate:.0%}) | {s.fast_1:.0%} | {gm} | {roof} | {evals} | "
            f"{report.wall_s / 60:.1f} min | "
            f"{host_line(report.host)} | {stem}.json | {notes} |\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--target", default="mtia")
    parser.add_argument("--machine", default="mtia-2i")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--problems", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--no-search", action="store_true")
    parser.add_argument("--search-time-limit", type=float, default=None, metavar="S")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help="start no new problem after S seconds")
    parser.add_argument("--eval-timeout", type=float, default=None, metavar="S")
    parser.add_argument("--results-dir", type=Path, default=REPO / "docs" / "results")
    parser.add_argument("--note", default="", help="free text for the history line")
    args = parser.parse_args(argv)

    results_dir: Path = args.results_dir
    results_dir.mkdir(parents=True, exist_ok=True)
    previous = _previous(results_dir)
    stem = _stem(results_dir, dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"))
    config = BenchConfig(suite=args.suite, target=args.target, machine=args.machine, budget=args.budget,
                         jobs=args.jobs, problems=tuple(p for p in args.problems.split(",") if p),
                         search=not args.no_search and args.budget > 0,
                         search_time_limit_s=args.search_time_limit, time_limit_s=args.time_limit,
                         eval_timeout_s=args.eval_timeout,
                         out_dir=REPO / "runs" / stem)
    report = run_bench(config)
    print(format_table(report))
    print()
    print(format_summary(report))
    write_json(report, results_dir / f"{stem}.json")
    write_csv(report, results_dir / f"{stem}.csv")
    plot_report(report, results_dir / f"{stem}.png")
    history = results_dir / "BENCH_HISTORY.md"
    if not history.exists():
        history.write_text(HISTORY_HEADER)
    with history.open("a") as fh:
        fh.write(history_line(report, stem, args.note))
    print(f"\nrecorded {results_dir / stem}.json/.csv/.png and a line in {history}")
    if previous is not None:
        print(f"\nchanges since {previous.name}:")
        print(format_changes(compare(load_json(previous), report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
