"""Fewer launches than Inductor: a GEMM or convolution group merged with the pointwise group that
consumes its output, seeded with both kernels fused into one (`mutations.epilogue.fuse_epilogue`).

Inductor leaves GEMMs and convolutions to library calls on CPU tensors, so it never fuses their
epilogues (bias + GELU, residual adds, ReLU): each is a second launch that reads the output back.
A merge is kept only where the fused draft exists; the merged group's Inductor draft (the same two
kernels as before) stays its baseline, so the tuned model still takes Inductor's kernels wherever the
fused one is not faster.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kegen.tune.partition import Group, Partition, PartitionError, merge, problem_source

log = logging.getLogger(__name__)

PRODUCERS = ("mm", "addmm", "bmm", "baddbmm", "convolution")


@dataclass
class Fused:
    """A merged group's drafts: Inductor's (its baseline) and the fused one (its seed)."""

    inductor: str
    fused: str
    members: list[str]  # the kernels it replaces, in run order
    problem_name: str  # the file name the drafts were made from (their docstrings name it)


def _consumer(part: Partition, k: int) -> int | None:
    """The pointwise group that alone reads group k's outputs (None if there is none or several)."""
    outs = set(part.groups[k].outputs)
    readers = [j for j, g in enumerate(part.groups) if j != k and outs & (set(g.inputs) | set(g.viewed))]
    returned = _returned(part)
    if len(readers) != 1 or outs & returned:
        return None
    j = readers[0]
    return j if part.groups[j].kernel.startswith("triton_poi") and j > k else None


def _returned(part: Partition) -> set[str]:
    out = next(n for n in part.graph.graph.nodes if n.op == "output")
    return {a.name for a in out.all_input_nodes}


def fuse_groups(part: Partition, draft: Any, model: str, variant: int) -> tuple[Partition, dict[int, Fused]]:
    """`part` with every GEMM/convolution group merged into its pointwise consumer where the fused
    draft exists; {index of a merged group: its drafts}. `draft(problem_path) -> source` is
    Inductor's drafter."""
    from kegen.search.operators.mutations.base import MutationError
    from kegen.search.operators.mutations.epilogue import fuse_epilogue

    fused: dict[str, Fused] = {}  # keyed by the merged group's first node while indices move
    tried: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="kegen-fuse-") as tmp:
        changed = True
        while changed:
            changed = False
            for k, g in enumerate(part.groups):
                if g.kernel not in PRODUCERS or g.nodes[0] in fused:
                    continue
                j = _consumer(part, k)
                if j is None or (g.nodes[0], part.groups[j].nodes[0]) in tried:
                    continue
                tried.add((g.nodes[0], part.groups[j].nodes[0]))
                c = part.groups[j]
                try:
                    merged_part = merge(part, [k, j], f"{g.kernel}_{c.kernel}")
                except PartitionError:
                    continue
                merged = next(m for m in merged_part.groups if m.nodes == sorted_nodes(part, g, c))
                path = Path(tmp) / f"{merged.name}.py"
                try:
                    path.write_text(problem_source(merged_part, merged, model, variant))
                    inductor = draft(path)
                    source = fuse_epilogue(inductor)
                except (MutationError, PartitionError, SyntaxError, ValueError):
                    continue
                except Exception as exc:  # a merge is optional: anything else leaves the two groups apart
                    log.debug("fusing %s into %s: %s", c.kernel, g.kernel, exc)
                    continue
                part = merged_part
                fused[merged.nodes[0]] = Fused(inductor, source, [g.kernel, c.kernel], path.name)
                changed = True
                break
    by_index = {g.index: fused[g.nodes[0]] for g in part.groups if g.nodes[0] in fused}
    return part, by_index


def sorted_nodes(part: Partition, a: Group, b: Group) -> list[str]:
    order = {n.name: i for i, n in enumerate(part.graph.graph.nodes)}
    return sorted([*a.nodes, *b.nodes], key=lambda n: order[n])
