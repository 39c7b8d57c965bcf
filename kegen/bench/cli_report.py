"""`kegen report` on bench results: the targets table and summary of a `kegen bench` run or a record."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kegen.bench.results import load_json
from kegen.bench.table import format_summary, format_table


def bench_results_path(path: Path) -> Path | None:
    """The bench results JSON that `path` names (a results.json, a record such as
    docs/results/production_mtia.json, or a folder holding results.json); None if it is not one."""
    candidate = path / "results.json" if path.is_dir() else path
    if not candidate.is_file() or candidate.suffix != ".json":
        return None
    try:
        data = json.loads(candidate.read_text())
    except (OSError, ValueError):
        return None
    return candidate if isinstance(data, dict) and "schema" in data and "problems" in data else None


def print_bench_report(path: Path) -> int:
    """Print the targets table and the summary of the bench results at `path`; 1 if unreadable."""
    try:
        report = load_json(path)
    except (ValueError, KeyError, TypeError) as exc:
        print(f"kegen report: {path}: {exc}", file=sys.stderr)
        return 1
    print(format_table(report))
    print()
    print(format_summary(report))
    return 0
