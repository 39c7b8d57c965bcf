"""One self-contained HTML page per run (plots embedded as PNG data URIs)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from kegen.report import plots
from kegen.report.llm import llm_html
from kegen.report.profiles import best_profile_html
from kegen.report.text import summary_table, text_report, tree_text
from kegen.search.store import GraphStore

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>kegen run {run_id}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}
table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ddd;padding:2px 6px}}
pre{{background:#f6f6f6;padding:.8em;
overflow:auto;font-size:12px}}img{{max-width:100%}}h2{{border-bottom:1px solid #ddd}}</style></head><body>
<h1>kegen run {run_id}</h1><p>{headline}</p>
<h2>Fitness over time</h2><img src="data:image/png;base64,{fitness}">
<h2>Search tree</h2><img src="data:image/png;base64,{tree}"><pre>{tree_text}</pre>
<h2>Best kernel</h2>{roofline}{profile}<pre>{best_code}</pre>
<h2>All nodes</h2><pre>{table}</pre>
<h2>LLM calls</h2>{llm}
<h2>Text summary</h2><pre>{text}</pre>
</body></html>
"""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_report(store: GraphStore, run_id: str, out_dir: Path) -> Path:
    """Write report.html (and the plots as PNG files) into `out_dir`; returns the HTML path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fit, tree = plots.fitness_over_time(store, run_id), plots.search_tree(store, run_id)
    (out_dir / "fitness.png").write_bytes(fit)
    (out_dir / "tree.png").write_bytes(tree)
    best = store.best(run_id, k=1)
    ev = store.evaluation(best[0].id) if best else None
    profile = ev.profile if ev else {}
    roof = plots.roofline(profile) if profile else None
    if roof:
        (out_dir / "roofline.png").write_bytes(roof)
    headline = (
        f"best: node {best[0].id}, <b>{best[0].fitness:.3f}x</b> over the seed — "
        f"{html.escape(best[0].description)}"
        if best
        else "no correct candidate"
    )
    page = PAGE.format(
        run_id=html.escape(run_id),
        headline=headline,
        fitness=_b64(fit),
        tree=_b64(tree),
        tree_text=html.escape(tree_text(store, run_id)),
        roofline=f'<img src="data:image/png;base64,{_b64(roof)}">' if roof else "<p>(no roofline data)</p>",
        profile=best_profile_html(store, best[0]) if best else "<p>(no correct candidate)</p>",
        best_code=html.escape(best[0].code or "") if best else "",
        table=html.escape(summary_table(store, run_id, limit=1000)),
        llm=llm_html(store, run_id),
        text=html.escape(text_report(store, run_id)),
    )
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
