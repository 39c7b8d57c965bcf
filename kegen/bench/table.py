"""Readable text of a bench report: a per-problem table and the suite's metrics."""

from __future__ import annotations

from kegen.bench.results import BenchReport, ProblemResult

COLUMNS = (
    "problem", "class", "seed", "seed x", "best x", "vs compile", "roofline", "evals", "search s", "search",
)  # fmt: skip


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _cells(p: ProblemResult) -> tuple[str, ...]:
    seed = "ok" if p.seed_correct else p.seed_status.upper()
    search = p.search_state + (" (improved)" if p.best_source == "search" else "")
    return (p.name, p.op_class, seed, _x(p.seed_speedup if p.seed_correct else None), _x(p.speedup),
            _x(p.speedup_vs_compile), _pct(p.roofline_fraction), str(p.search_evaluations),
            f"{p.search_time_s:.1f}", search)


def format_table(report: BenchReport) -> str:
    """One line per problem, columns aligned."""
    rows = [COLUMNS, *(_cells(p) for p in report.problems)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_summary(report: BenchReport) -> str:
    """The suite's metrics in a few lines, with the notes (e.g. why the search did not run)."""
    s = report.finalize().summary
    assert s is not None
    lines = [
        f"suite {report.suite}: {s.problems} problems, target {report.target} ({report.machine}), "
        f"budget {report.budget} evaluations/problem, {report.wall_s:.0f} s",
        f"  pass rate        {s.correct}/{s.problems} = {s.pass_rate:.1%}",
        f"  fast_1           {s.fast_1:.1%}   (correct and faster than the baseline, "
        f"{report.baseline or '-'})",
        f"  geomean speedup  {_x(s.geomean_speedup)}   (seed {_x(s.geomean_seed_speedup)}, "
        f"search gain {_x(s.geomean_search_gain)})",
        f"  roofline         {_pct(s.geomean_roofline_fraction)} "
        f"(seed {_pct(s.geomean_seed_roofline_fraction)}; geomean fraction over correct problems)",
    ]
    if s.compile_compared:
        lines.append(
            f"  vs torch.compile geomean {_x(s.geomean_speedup_vs_compile)}, faster on "
            f"{s.fast_1_vs_compile:.1%} of {s.compile_compared} problems (torch.compile on {report.machine})"
        )
    classes = ", ".join(f"{name} {c['correct']}/{c['problems']} {_x(c['geomean_speedup'])}"
                        for name, c in s.by_op_class.items())
    lines.append(f"  by op class      {classes}")
    lines.extend(f"  note: {n}" for n in report.notes)
    return "\n".join(lines)
