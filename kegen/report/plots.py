"""matplotlib figures of a run (PNG bytes): fitness over time, the search tree, the roofline."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kegen.search.store import GraphStore, Node  # noqa: E402


def _png(fig) -> bytes:  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def fitness_over_time(store: GraphStore, run_id: str) -> bytes:
    """Each evaluation's speedup (dots; failures at 0) and the best so far (line)."""
    done = sorted((n for n in store.nodes(run_id) if n.evaluated), key=lambda n: n.evaluated_at or 0)
    xs = list(range(len(done)))
    ys = [n.fitness if n.correct else 0.0 for n in done]
    best, run_best = 0.0, []
    for y in ys:
        best = max(best, y)
        run_best.append(best)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.scatter(xs, ys, c=["tab:blue" if n.correct else "tab:red" for n in done], s=18, label="candidate")
    ax.step(xs, run_best, where="post", color="tab:green", label="best so far")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("speedup over seed")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("fitness over time")
    return _png(fig)


def search_tree(store: GraphStore, run_id: str) -> bytes:
    """The tree laid out by depth; colour = speedup, red = failed."""
    nodes = store.nodes(run_id)
    kids: dict[int | None, list[Node]] = {}
    for n in nodes:
        kids.setdefault(n.parent_id, []).append(n)
    pos: dict[int, tuple[float, float]] = {}
    counter = [0]

    def place(n: Node) -> float:
        ch = kids.get(n.id, [])
        if not ch:
            x = float(counter[0])
            counter[0] += 1
        else:
            x = sum(place(c) for c in ch) / len(ch)
        pos[n.id] = (x, -n.depth)
        return x

    for r in kids.get(None, []):
        place(r)
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * counter[0]), 3.5))
    for n in nodes:
        if n.parent_id is not None and n.parent_id in pos:
            (x0, y0), (x1, y1) = pos[n.parent_id], pos[n.id]
            ax.plot([x0, x1], [y0, y1], color="lightgrey", lw=1, zorder=1)
    top = max((n.fitness for n in nodes if n.correct), default=1.0) or 1.0
    for n in nodes:
        x, y = pos[n.id]
        color = plt.cm.viridis(n.fitness / top) if n.correct else (1, 0.2, 0.2, 1)
        ax.scatter([x], [y], color=color, s=60, zorder=2, edgecolors="black", linewidths=0.4)
        ax.annotate(str(n.id), (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=6)
    ax.set_yticks([-d for d in range(max((n.depth for n in nodes), default=0) + 1)])
    ax.set_yticklabels([str(d) for d in range(max((n.depth for n in nodes), default=0) + 1)])
    ax.set_ylabel("depth")
    ax.set_xticks([])
    ax.set_title("search tree (colour: speedup, red: failed)")
    return _png(fig)


def roofline(profile: dict, label: str = "best") -> bytes | None:
    """The kernel's position under the roofline, from the profile's FLOP/s, bandwidth and intensity."""
    roof = profile.get("roofline")
    metrics = profile.get("metrics")
    flat: dict = {**profile}
    for part in (roof, metrics):
        if isinstance(part, dict):
            flat.update(part)
    flops = _num(flat, "achieved_flops", "flops_per_s", "achieved_flop_s")
    peak = _num(flat, "peak_flops", "peak_flop_s")
    bw = _num(flat, "dram_bw", "peak_bandwidth", "peak_bytes_per_s", "peak_dram_bandwidth")
    ai = _num(flat, "arithmetic_intensity", "intensity")
    frac = _num(flat, "roofline_fraction", "fraction")
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    if flops and peak and bw and ai:
        xs = [10 ** (k / 10) for k in range(-30, 41)]
        ax.loglog(xs, [min(peak, bw * x) for x in xs], color="black", label="roofline")
        ax.scatter([ai], [flops], color="tab:orange", zorder=3, label=label)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("FLOP/s")
        ax.legend(fontsize=8)
    elif frac is not None:
        ax.barh([label], [frac], color="tab:orange")
        ax.set_xlim(0, max(1.0, frac))
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xlabel("fraction of the roofline reached")
    else:
        plt.close(fig)
        return None
    ax.set_title("roofline position")
    return _png(fig)


def _num(d: dict, *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, int | float) and math.isfinite(v) and v > 0:
            return float(v)
    return None
