"""A bench report as a Markdown record: the targets table, the suite's goals met or missed, and for
every problem that misses its roofline target the best kernel's profile diagnosis (the gap)."""

from __future__ import annotations

from kegen.bench.results import BenchReport, ProblemResult
from kegen.bench.table import format_summary, format_table

# Suite-level goals of issue 18 (production suite, offline operator, <= 50 evaluations per problem).
GOAL_FAST_1 = 1.0
GOAL_GEOMEAN_VS_SEED = 3.0
GOAL_GEOMEAN_VS_COMPILE = 1.5


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def gap_line(p: ProblemResult) -> str:
    """Why `p` misses its target, from what the record holds (its best kernel's diagnosis)."""
    if not p.correct:
        return f"**{p.name}**: no correct kernel (seed {p.seed_status}: {p.seed_message[:200] or '-'})"
    frac = p.roofline_fraction
    reached = "no roofline" if frac is None else f"{100 * frac:.1f}% of its roofline"
    target = f"target >= {100 * (p.target_roofline or 0):.0f}%"
    why = p.best_diagnosis or "no profile diagnosis recorded"
    return f"**{p.name}** ({p.op_class}, best from {p.best_source}): {reached}, {target}. {why}"


def goals_table(report: BenchReport) -> str:
    """The suite-level goals with the values reached."""
    s = report.finalize().summary
    assert s is not None
    gemm = [p for p in report.problems if p.target_met is not None and (p.target_roofline or 0) < 0.85]
    memory = [p for p in report.problems if p.target_met is not None and (p.target_roofline or 0) >= 0.85]

    def share(rows: list[ProblemResult]) -> tuple[str, str]:
        met = sum(bool(p.target_met) for p in rows)
        return f"{met}/{len(rows)}", ("met" if rows and met == len(rows) else "missed" if rows else "-")

    def verdict(value: float | None, goal: float) -> str:
        return "-" if value is None else ("met" if value >= goal else "missed")

    gemm_v, memory_v = share(gemm), share(memory)
    rows = [
        ("fast_1 (correct and faster than the seed)", f"{s.fast_1:.1%}", "100%",
         verdict(s.fast_1, GOAL_FAST_1)),
        ("geomean speedup over the seeds", _x(s.geomean_search_gain), f">= {GOAL_GEOMEAN_VS_SEED:g}x",
         verdict(s.geomean_search_gain, GOAL_GEOMEAN_VS_SEED)),
        ("geomean speedup over torch.compile", _x(s.geomean_speedup_vs_compile)
         + f" ({s.compile_compared} problems)", f">= {GOAL_GEOMEAN_VS_COMPILE:g}x",
         verdict(s.geomean_speedup_vs_compile, GOAL_GEOMEAN_VS_COMPILE)),
        ("GEMM-class at >= 80% of roofline", gemm_v[0], "all", gemm_v[1]),
        ("memory-bound at >= 85% of roofline", memory_v[0], "all", memory_v[1]),
    ]
    lines = ["| goal | reached | target | verdict |", "|---|---|---|---|"]
    lines.extend(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    return "\n".join(lines)


def format_markdown(report: BenchReport, title: str, preamble: str = "") -> str:
    """The whole record: title, how it was made, goals, the targets table, summary and gaps."""
    missed = [p for p in report.problems if p.target_met is False]
    parts = [f"# {title}", ""]
    if preamble:
        parts += [preamble.strip(), ""]
    parts += ["## Goals", "", goals_table(report), "",
              "## Per problem", "", "```text", format_table(report), "```", "",
              "```text", format_summary(report), "```", "",
              "## Gaps: problems below their roofline target", ""]
    parts += [f"- {gap_line(p)}" for p in missed] or ["none"]
    return "\n".join(parts) + "\n"
