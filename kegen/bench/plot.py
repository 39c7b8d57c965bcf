"""The bench plot: per problem, seed and best speedup over the baseline, and fraction of the roofline."""

from __future__ import annotations

from pathlib import Path

from kegen.bench.results import BenchReport


def plot_report(report: BenchReport, path: Path) -> Path:
    """Draw a two-panel bar chart (speedups, roofline fraction) to `path` (PNG) with matplotlib's Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = report.problems
    names = [p.name for p in problems]
    xs = list(range(len(problems)))
    width = 0.4
    seed = [p.seed_speedup if p.seed_correct and p.seed_speedup else 0.0 for p in problems]
    best = [p.speedup or 0.0 for p in problems]
    roof = [p.roofline_fraction or 0.0 for p in problems]
    seed_roof = [p.seed_roofline if p.seed_correct and p.seed_roofline else 0.0 for p in problems]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8.0, 0.45 * len(problems) + 2), 7.5), sharex=True)
    ax1.bar([x - width / 2 for x in xs], seed, width, label="seed", color="#9aa5b1")
    ax1.bar([x + width / 2 for x in xs], best, width, label="best (search)", color="#2f6fbd")
    ax1.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    positive = [v for v in seed + best if v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax1.set_yscale("log")
    for x, p in zip(xs, problems, strict=True):
        if not p.correct:
            ax1.annotate("fail", (x, 0), xytext=(0, 3), textcoords="offset points", ha="center",
                         color="#c0392b", fontsize=7, rotation=90)
    ax1.set_ylabel(f"speedup vs {report.baseline or 'baseline'}")
    summary = report.summary
    title = f"kegen bench {report.suite} — target {report.target}, budget {report.budget}"
    if summary is not None:
        gm = f"{summary.geomean_speedup:.2f}x" if summary.geomean_speedup else "-"
        title += f"\npass {summary.pass_rate:.0%}, fast_1 {summary.fast_1:.0%}, geomean {gm}"
    ax1.set_title(title, fontsize=10)
    ax1.legend(fontsize=8)
    ax2.bar([x - width / 2 for x in xs], seed_roof, width, label="seed", color="#9aa5b1")
    ax2.bar([x + width / 2 for x in xs], roof, width, label="best", color="#27ae60")
    ax2.set_ylabel("fraction of roofline")
    ax2.set_ylim(0, max([1.0, *roof, *seed_roof]) * 1.05)
    ax2.legend(fontsize=8)
    ax2.set_xticks(xs)
    ax2.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
