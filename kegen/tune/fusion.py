"""Fewer launches than Inductor: a GEMM or convolution group merged with the pointwise group that
consumes its output, seeded with both kernels fused into one (`mutations.epilogue.fuse_epilogue`);
a GEMM whose weight a pointwise group computes from the model's parameters and buffers alone (a
quantized weight unpacked on every call) merged with that group, seeded with kegen's packed-weight
template draft (`drafting.quant_packed`), which reads the integers in the GEMM's loop.

Inductor leaves GEMMs and convolutions to library calls on CPU tensors, so it never fuses their
epilogues (bias + GELU, residual adds, ReLU): each is a second launch that reads the output back.
A merge is kept only where the fused draft exists; the merged group's Inductor draft (the same two
kernels as before) stays its baseline, so the tuned model still takes Inductor's kernels wherever the
fused one is not faster.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
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
    change: str = ""  # what the fused seed does, where not an epilogue fusion


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


PACKED_CHANGE = "read the weight's integers in the GEMM's loop ({members}: the unpacked weight never written)"


def fuse_groups(
    part: Partition, draft: Any, model: str, variant: int, constants: frozenset[str] = frozenset()
) -> tuple[Partition, dict[int, Fused]]:
    """`part` with every GEMM/convolution group merged into its pointwise consumer where the fused
    draft exists, and every GEMM with the group that unpacks its weight from `constants` (the graph
    inputs that are the model's parameters and buffers) where the packed template drafts the merge;
    {index of a merged group: its drafts}. `draft(problem_path) -> source` is Inductor's drafter."""
    fused: dict[str, Fused] = {}  # keyed by the merged group's first node while indices move
    tried: set[tuple[str, str]] = set()
    epilogue_drafts = _epilogue_drafts(draft)
    with tempfile.TemporaryDirectory(prefix="kegen-fuse-") as tmp_dir:
        tmp = Path(tmp_dir)
        if constants:
            part = _fuse_unpacking(part, draft, model, variant, constants, tmp, fused)
        part = _fuse_gates(part, draft, model, variant, tmp, fused)
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
                done = _merge_drafted(
                    part, [k, j], f"{g.kernel}_{c.kernel}", model, variant, tmp, epilogue_drafts
                )
                if done is None:
                    continue
                part, first, name, (inductor, source) = done
                fused[first] = Fused(inductor, source, [g.kernel, c.kernel], name)
                changed = True
                break
    by_index = {g.index: fused[g.nodes[0]] for g in part.groups if g.nodes[0] in fused}
    return part, by_index


def _fuse_unpacking(
    part: Partition,
    draft: Any,
    model: str,
    variant: int,
    constants: frozenset[str],
    tmp: Path,
    fused: dict[str, Fused],
) -> Partition:
    """Each `mm` group merged with the pointwise group that alone computes its weight operand from
    `constants`, where kegen's packed template drafts the merged problem."""
    tried: set[str] = set()  # GEMM groups (by first node) already tried: a merge restarts the scan
    k = 0
    while k < len(part.groups):
        g = part.groups[k]
        j = _unpacking_producer(part, g, constants) if g.nodes[0] not in tried else None
        k += 1
        if j is None or not _worth_an_epilogue(part, k - 1, j):
            continue
        tried.add(g.nodes[0])
        p = part.groups[j]
        done = _merge_drafted(part, [j, k - 1], "mm_packed", model, variant, tmp, _packed_drafts(draft))
        if done is None:
            continue
        members = [p.kernel, g.kernel]
        part, first, name, (inductor, source) = done
        fused[first] = Fused(
            inductor, source, members, name, PACKED_CHANGE.format(members=" + ".join(members))
        )
        k = 0
    return part


GATED_CHANGE = "both products of one input in one kernel, {members}'s activation in its epilogue (D83)"


def _fuse_gates(
    part: Partition, draft: Any, model: str, variant: int, tmp: Path, fused: dict[str, Fused]
) -> Partition:
    """Each pointwise group that alone reads the outputs of two GEMM groups (a gated MLP's gate and up
    projections and its `act(gate) * up`) merged with both, where kegen's linear template drafts the
    merged problem with the two products in one kernel (`templates.gemm.fuse_gates`): that draft is its
    seed, Inductor's kernels its baseline."""
    tried: set[str] = set()  # pointwise groups (by first node) already tried: a merge restarts the scan
    k = 0
    while k < len(part.groups):
        c = part.groups[k]
        k += 1
        if not c.kernel.startswith("triton_poi") or c.nodes[0] in tried:
            continue
        tried.add(c.nodes[0])
        gemms = [
            i
            for i, g in enumerate(part.groups)
            if g.kernel in ("mm", "addmm") and _consumer(part, i) == k - 1
        ]
        if len(gemms) != 2:
            continue
        members = [part.groups[i].kernel for i in gemms] + [c.kernel]
        done = _merge_drafted(part, [*gemms, k - 1], "mm_mm_gated", model, variant, tmp, _gated_drafts(draft))
        if done is None:
            continue
        part, first, name, (inductor, source) = done
        fused[first] = Fused(
            inductor, source, members, name, GATED_CHANGE.format(members=" + ".join(members))
        )
        k = 0
    return part


# A float weight written and read back (Inductor's unpacking) must cost more than the launch the merge
# gives up where the GEMM would otherwise take its pointwise consumer as an epilogue: ~1.3 us of DRAM
# traffic on mtia-2i (204.8 GB/s), a launch and its tail.
EPILOGUE_BYTES = 256 * 1024


def _worth_an_epilogue(part: Partition, k: int, j: int) -> bool:
    """Whether merging the unpacking group j into GEMM group k pays where it costs k its epilogue
    fusion (the merged group is not one the epilogue fusion takes)."""
    if _consumer(part, k) is None:
        return True
    import torch

    outputs = part.groups[j].outputs
    weight = part.values.get(outputs[0]) if outputs else None
    if not isinstance(weight, torch.Tensor):
        return False
    return 2 * weight.numel() * weight.element_size() > EPILOGUE_BYTES


def _unpacking_producer(part: Partition, g: Group, constants: frozenset[str]) -> int | None:
    """The index of the pointwise group that computes group g's (a lone `mm`) weight operand from
    `constants` alone and whose output nothing else reads; None if there is none."""
    import torch

    if g.kernel != "mm":
        return None
    nodes = {n.name: n for n in part.graph.graph.nodes}
    mm = [nodes[name] for name in g.nodes if nodes[name].target is torch.ops.aten.mm.default]
    if len(mm) != 1 or len(mm[0].args) < 2:
        return None
    weight = getattr(mm[0].args[1], "name", None)
    for j, p in enumerate(part.groups):
        if weight not in p.outputs or not p.kernel.startswith("triton_poi"):
            continue
        roots = set(p.inputs) | {view[0] for view in p.viewed.values()}
        if not roots or not roots <= constants:
            return None
        readers = [q for q in part.groups if q is not p and set(p.outputs) & (set(q.inputs) | set(q.viewed))]
        only_g = len(readers) == 1 and readers[0] is g
        return j if only_g and j < part.groups.index(g) and not set(p.outputs) & _returned(part) else None
    return None


GroupDrafts = tuple[str, str]  # a merged group's Inductor draft (its baseline) and fused draft (its seed)


def _merge_drafted(
    part: Partition,
    indices: list[int],
    name: str,
    model: str,
    variant: int,
    tmp: Path,
    drafts: Callable[[Path], GroupDrafts | None],
) -> tuple[Partition, str, str, GroupDrafts] | None:
    """`part` with groups `indices` merged into one group named `name`, the merged group's first node,
    the file name of its problem and its drafts (`drafts(problem_path)`); None where the merge or a
    draft fails (a merge is optional: the groups then stay apart)."""
    nodes = {n for i in indices for n in part.groups[i].nodes}
    try:
        merged_part = merge(part, indices, name)
    except PartitionError:
        return None
    merged = next(m for m in merged_part.groups if set(m.nodes) == nodes)
    path = tmp / f"{merged.name}.py"
    try:
        path.write_text(problem_source(merged_part, merged, model, variant))
        made = drafts(path)
    except Exception as exc:
        log.debug("merging %s: %s", " + ".join(part.groups[i].kernel for i in indices), exc)
        return None
    return None if made is None else (merged_part, merged.nodes[0], path.name, made)


def _epilogue_drafts(draft: Callable[[Path], str]) -> Callable[[Path], GroupDrafts]:
    """Inductor's draft and its kernels fused into one (`mutations.epilogue.fuse_epilogue`)."""
    from kegen.search.operators.mutations.epilogue import fuse_epilogue

    def drafts(path: Path) -> GroupDrafts:
        inductor = draft(path)
        return inductor, fuse_epilogue(inductor)

    return drafts


def _packed_drafts(draft: Callable[[Path], str]) -> Callable[[Path], GroupDrafts | None]:
    """Inductor's draft and kegen's packed-weight template draft, where the template drafts it."""
    from kegen.search.operators.drafting import analyze

    def drafts(path: Path) -> GroupDrafts | None:
        source = analyze(path).source
        if source is None or "packed_linear_kernel" not in source:
            return None
        return draft(path), source

    return drafts


def _gated_drafts(draft: Callable[[Path], str]) -> Callable[[Path], GroupDrafts | None]:
    """Inductor's draft and the linear template's gated variant (both products in one kernel)."""
    from kegen.search.operators.drafting import analyze
    from kegen.search.operators.drafting.matmul import GATED_VARIANT

    def drafts(path: Path) -> GroupDrafts | None:
        source = dict(analyze(path).variants).get(GATED_VARIANT)
        return None if source is None else (draft(path), source)

    return drafts
