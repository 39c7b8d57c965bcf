"""`kegen bench`: evaluate and search every problem of a suite; report pass rate, fast_1, speedups.

    from kegen.bench import BenchConfig, run_bench
    report = run_bench(BenchConfig(suite="default", budget=4))
    report.summary.pass_rate, report.summary.fast_1, report.summary.geomean_speedup

Results are written as JSON and CSV (`kegen.bench.results`) so runs can be compared over time.
"""

from kegen.bench.metrics import SuiteMetrics, summarize
from kegen.bench.results import BenchReport, ProblemResult
from kegen.bench.runner import BenchConfig, run_bench

__all__ = ["BenchConfig", "BenchReport", "ProblemResult", "SuiteMetrics", "run_bench", "summarize"]
