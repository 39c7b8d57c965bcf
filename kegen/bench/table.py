"""Readable text of a bench report: the per-problem targets table and the suite's metrics.

The table reads like KernelEvolve's: per problem the seed's and the best kernel's simulated time,
torch.compile's time on the same target, the speedups over the seed and over the compiler, the
best kernel's roofline fraction against the problem's target (met / MISSED), fast_1 (correct and
faster than the seed) and the evaluations the search needed to reach 90% of its final best.
"""

from __future__ import annotations

from kegen.bench.results import BenchReport, ProblemResult

COLUMNS = (
    "problem", "class", "seed", "seed time", "best time", "compile", "x seed", "vs compile", "roofline",
    "target", "fast_1", "evals->90%", "evals", "search",
)  # fmt: skip


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _time(seconds: float | None) -> str:
    """Simulated seconds in the unit that suits them (us below 1 ms, else ms)."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _target(p: ProblemResult) -> str:
    if p.target_roofline is None:
        return "-"
    met = p.target_met
    verdict = "?" if met is None else ("met" if met else "MISSED")
    return f">={100 * p.target_roofline:.0f}% {verdict}"


def _compile(p: ProblemResult) -> str:
    if p.compile_time_s is None:
        return "-" if not p.compile_message else "failed"
    return _time(p.compile_time_s) + (" (host ops)" if p.compile_host_ops else "")


def _cells(p: ProblemResult) -> tuple[str, ...]:
    seed = "ok" if p.seed_correct else p.seed_status.upper()
    search = p.search_state + (" (improved)" if p.best_source == "search" else "")
    fast = "yes" if p.correct and (p.speedup_vs_seed or 0.0) > 1.0 else "no"
    to_90 = "-" if p.evals_to_90 is None else str(p.evals_to_90)
    return (p.name, p.op_class, seed, _time(p.seed_time_s if p.seed_correct else None),
            _time(p.best_time_s if p.correct else None), _compile(p), _x(p.speedup_vs_seed),
            _x(p.speedup_vs_compile), _pct(p.roofline_fraction), _target(p), fast, to_90,
            str(p.search_evaluations), search)


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
    if s.targets_set:
        lines.append(f"  roofline targets met on {s.targets_met}/{s.targets_set} problems"
                     + _targets_by_kind(report))
    if s.median_evals_to_90 is not None:
        lines.append(f"  evals to 90%     median {s.median_evals_to_90:g} evaluations after the seed's "
                     "to reach 90% of the final best")
    classes = ", ".join(f"{name} {c['correct']}/{c['problems']} {_x(c['geomean_speedup'])}"
                        for name, c in s.by_op_class.items())
    lines.append(f"  by op class      {classes}")
    lines.extend(f"  note: {n}" for n in report.notes)
    return "\n".join(lines)


def _targets_by_kind(report: BenchReport) -> str:
    """' (>=80%: 3/7, >=85%: 5/11)': the verdicts grouped by target level."""
    groups: dict[float, list[bool]] = {}
    for p in report.problems:
        met = p.target_met
        if p.target_roofline is not None and met is not None:
            groups.setdefault(p.target_roofline, []).append(met)
    if len(groups) < 2:
        return ""
    parts = [f">={100 * t:.0f}%: {sum(v)}/{len(v)}" for t, v in sorted(groups.items())]
    return " (" + ", ".join(parts) + ")"
