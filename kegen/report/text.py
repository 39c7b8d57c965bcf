"""Text renderings of a run: the summary table, the search tree, the best kernel's profile."""

from __future__ import annotations

from kegen.report.llm import llm_nodes_text, llm_summary
from kegen.report.profiles import best_profile_text
from kegen.search.store import GraphStore, Node
from mtia_sim.stats import fmt_time


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def summary_table(store: GraphStore, run_id: str, limit: int = 30) -> str:
    """Every node (most recent `limit` after the best) as a table: id, parent, verdict, speedup, change."""
    nodes = store.nodes(run_id)
    best = store.best(run_id, k=1)
    best_id = best[0].id if best else None
    rows = [f"{'node':>4} {'parent':>6} {'verdict':<15} {'speedup':>8} {'time':>10}  change"]
    shown = nodes if len(nodes) <= limit else [nodes[0]] + nodes[-(limit - 1) :]
    for n in shown:
        ev = store.evaluation(n.id)
        mark = "*" if n.id == best_id else " "
        sp = f"{n.fitness:.3f}x" if n.correct else "-"
        t = fmt_time(ev.candidate_time_s if ev else None, "-")
        rows.append(
            f"{n.id:>4}{mark}{(n.parent_id if n.parent_id is not None else '-'):>6} "
            f"{(n.verdict or n.status):<15} {sp:>8} {t:>10}  "
            f"{_cut(n.description, 70)}"
        )
    if len(nodes) > limit:
        rows.insert(2, f"{'':>4}  ... {len(nodes) - limit} more nodes")
    return "\n".join(rows)


def tree_text(store: GraphStore, run_id: str) -> str:
    """The search tree, indented, one node per line."""
    root = store.root(run_id)
    if root is None:
        return "(empty run)"
    kids: dict[int | None, list[Node]] = {}
    for n in store.nodes(run_id):
        kids.setdefault(n.parent_id, []).append(n)
    lines: list[str] = []

    def walk(n: Node, prefix: str, last: bool) -> None:
        branch = "" if n.parent_id is None else ("└─ " if last else "├─ ")
        score = f"{n.fitness:.3f}x" if n.correct else (n.verdict or n.status)
        lines.append(f"{prefix}{branch}[{n.id}] {score}  {_cut(n.description, 60)}")
        children = kids.get(n.id, [])
        for i, c in enumerate(children):
            walk(
                c,
                prefix + ("" if n.parent_id is None else ("   " if last else "│  ")),
                i == len(children) - 1,
            )

    walk(root, "", True)
    return "\n".join(lines)


def profile_text(profile: dict) -> str:
    """A one-line reading of a stored profile: measured limiter, time, roofline, utilisation, stalls."""
    from kegen.profiling import diagnose
    from kegen.profiling.render import diagnosis_line

    if not profile:
        return "(no profile recorded)"
    return diagnosis_line(diagnose(profile))


def text_report(store: GraphStore, run_id: str) -> str:
    """The whole run as text."""
    run = store.get_run(run_id)
    nodes = store.nodes(run_id)
    best = store.best(run_id, k=1)
    usage = store.llm_usage(run_id)
    root = store.root(run_id)
    out = [
        f"run {run.id}: {run.problem_path}",
        f"target {run.target} ({run.machine}); status {run.status}"
        + (f"; stopped: {run.stop_reason}" if run.stop_reason else ""),
        f"nodes {len(nodes)} ({sum(1 for n in nodes if n.correct)} correct, "
        f"{sum(1 for n in nodes if n.evaluated and n.is_bug)} failed, "
        f"{sum(1 for n in nodes if not n.evaluated)} pending)",
    ]
    if usage["calls"]:
        out.append(llm_summary(store, run_id) or "")
    if best:
        b = best[0]
        ev = store.evaluation(b.id)
        out.append(f"best: node {b.id}, {b.fitness:.3f}x over the seed — {b.description}")
        if ev is not None:
            out.append(
                f"  time {fmt_time(ev.candidate_time_s, '-')} (seed {fmt_time(ev.baseline_time_s, '-')})"
                + (f", {ev.roofline_fraction:.1%} of roofline" if ev.roofline_fraction else "")
            )
            out.append(f"  profile: {profile_text(ev.profile)}")
        out += ["", best_profile_text(store, b)]
    if root is not None:
        out.append(f"seed: node {root.id} ({root.verdict})")
    out += [
        "",
        "fitness over time (evaluation order):",
        _sparkline(nodes),
        "",
        "search tree:",
        tree_text(store, run_id),
        "",
        summary_table(store, run_id, limit=40),
    ]
    if usage["calls"]:
        out += ["", "LLM calls per node (prompt and reply heads; the HTML report has them whole):"]
        out.append(llm_nodes_text(store, run_id))
    return "\n".join(out)


def _sparkline(nodes: list[Node]) -> str:
    done = sorted((n for n in nodes if n.evaluated and n.evaluated_at), key=lambda n: n.evaluated_at or 0)
    if not done:
        return "(nothing evaluated)"
    best, vals = 0.0, []
    for n in done:
        best = max(best, n.fitness if n.correct else 0.0)
        vals.append(best)
    top = max(vals) or 1.0
    bars = "▁▂▃▄▅▆▇█"
    return "".join(bars[min(7, int(v / top * 7.999))] for v in vals) + f"  best {top:.3f}x"
