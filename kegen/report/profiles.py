"""The profile part of a run report: the best kernel's measured profile and, step by step, why each
node on the path from the seed to the best is faster or slower than its parent (from the two
profiles: e.g. "fixes the idle PEs: 16 -> 64 of 64 PEs have work")."""

from __future__ import annotations

from kegen.profiling import Profile, diagnose_profile
from kegen.profiling.compare import explain
from kegen.profiling.render import diagnosis_line, terminal
from kegen.profiling.render import html as profile_html
from kegen.profiling.source import fill_source_text
from kegen.search.store import GraphStore, Node


def node_profile(store: GraphStore, node: Node) -> Profile | None:
    """The node's stored profile as a `Profile` (source text filled from its code), or None."""
    ev = store.evaluation(node.id)
    if ev is None or not ev.profile:
        return None
    try:
        prof = Profile.from_dict(ev.profile)
    except (TypeError, ValueError):
        return None
    fill_source_text(prof.lines, node.code or "")
    return prof


def path_to(store: GraphStore, node: Node) -> list[Node]:
    """The nodes from the root to `node`, root first."""
    return list(reversed(store.ancestors(node.id))) + [node]


def path_explanation(store: GraphStore, node: Node) -> list[str]:
    """One line per node on the path from the seed to `node`: its change and its measured effect."""
    lines = []
    prev: Profile | None = None
    for n in path_to(store, node):
        prof = node_profile(store, n)
        what = n.description or "seed"
        if prev is None or prof is None:
            d = diagnose_profile(prof) if prof is not None else None
            tail = f"; {diagnosis_line(d)}" if d is not None else ""
            lines.append(f"node {n.id} ({what}): {n.fitness:.3f}x{tail}")
        else:
            lines.append(f"node {n.id} <- {n.parent_id} ({what}): {explain(prev, prof)}")
        prev = prof if prof is not None else prev
    return lines


def best_profile_text(store: GraphStore, node: Node) -> str:
    """The best node's profile for the terminal, then how the search got there."""
    prof = node_profile(store, node)
    parts = [terminal(prof, top=5) if prof is not None else "(no profile recorded)"]
    parts += ["how the best was reached (each step measured against its parent):"]
    parts += [f"  {x}" for x in path_explanation(store, node)]
    return "\n".join(parts)


def best_profile_html(store: GraphStore, node: Node) -> str:
    """The best node's profile as HTML tables, then the path explanation as a list."""
    import html

    prof = node_profile(store, node)
    body = profile_html(prof) if prof is not None else "<p>(no profile recorded)</p>"
    steps = "".join(f"<li>{html.escape(x)}</li>" for x in path_explanation(store, node))
    return f"{body}<h3>How the best was reached</h3><ol>{steps}</ol>"
