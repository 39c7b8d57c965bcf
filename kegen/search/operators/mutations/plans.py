"""Whole-plan moves sized from the parent's measured grid (its profile), several knobs at once.

Single-knob steps reach a production plan only through a chain of improvements (a 2K GEMM seed at
64x64x32 needs tile x2 twice, BK, multi-buffering and the SRAM mode: five evaluations that each
must pay off). These moves jump there in one step, computed from what was measured, not from the
problem's name:

- `fill`: the largest (or, under-filled, the smallest) output tile that still gives every PE a
  program: grid axis blocks doubled (halved) one at a time while the launch keeps >= PEs programs
  (reaches < PEs), from the profile's programs and PEs of that kernel's launch.
- `plan`: for a dot kernel, `fill` capped at 256 (and at 128), its reduction block at 64,
  multi-buffering (`num_stages=2`) and the operands kept resident in SRAM (or, a second variant,
  in DRAM behind the SRAM cache); for other kernels,
  `fill` plus multi-buffering, so blocks fill all PEs and stream while the next block loads.

A plan that does not fit the local store is rejected by screening at compile time, at no
simulation cost.
"""

from __future__ import annotations

from typing import Any

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.mutations.blocks import BlockSite, _uses_dot, find_blocks, set_blocks
from kegen.search.operators.mutations.knobs import MAX_BLOCK, find_knobs, set_knob

DOT_TILE_CAPS = (256, 128)
DOT_K_BLOCK = 64
DOT_SRAM_MODES = ("resident", "cache")  # operands kept in SRAM, or DRAM behind the SRAM cache
MIN_DOT_BLOCK = 32


def _launch_programs(profile: Any, kernel: str) -> tuple[int, int] | None:
    """(programs, PEs) of the largest measured launch of `kernel`, if the profile has it."""
    best: tuple[int, int] | None = None
    for launch in getattr(profile, "launches", None) or []:
        if launch.kernel == kernel and launch.programs and launch.pes_total:
            if best is None or launch.programs > best[0]:
                best = (int(launch.programs), int(launch.pes_total))
    return best


def fill_tile(
    sites: list[BlockSite], programs: int, pes: int, cap: int, floor: int
) -> list[tuple[BlockSite, int]]:
    """New values of the grid-axis blocks: grown while >= `pes` programs remain, or shrunk until
    there are `pes` programs; [] when nothing changes."""
    values = {s.key: s.value for s in sites}
    p = programs
    if p >= 2 * pes:
        while p // 2 >= pes:
            growable = [s for s in sites if values[s.key] * 2 <= cap]
            if not growable:
                break
            s = min(growable, key=lambda x: (values[x.key], x.axis or 0))
            values[s.key] *= 2
            p //= 2
    elif p < pes:
        while p < pes:
            shrinkable = [s for s in sites if values[s.key] // 2 >= floor]
            if not shrinkable:
                break
            s = max(shrinkable, key=lambda x: (values[x.key], -(x.axis or 0)))
            values[s.key] //= 2
            p *= 2
    return [(s, values[s.key]) for s in sites if values[s.key] != s.value]


def _set_options(source: str, kernel: str, options: dict[str, Any]) -> str:
    """Set launch options of every launch of `kernel` (options the backend lacks are skipped)."""
    for name, value in options.items():
        knobs = [k for k in find_knobs(source, launch_options=True) if k.option and k.kernel == kernel]
        for knob in [k for k in knobs if k.name == name]:
            if knob.value != value:
                source = set_knob(source, knob, value)
    return source


def _plan(changes: list[tuple[BlockSite, int]], kernel: str, options: dict[str, Any]) -> Any:
    def apply(src: str) -> str:
        out = set_blocks(src, changes) if changes else src
        out = _set_options(out, kernel, options)
        if out == src:
            raise MutationError(f"the plan changes nothing in {kernel}")
        return out

    return apply


def plan_mutations(source: str, profile: Any) -> list[Mutation]:
    """`fill` and `plan` moves for every launch whose grid the profile measured."""
    by_launch: dict[tuple[str, int], list[BlockSite]] = {}
    for site in find_blocks(source):
        by_launch.setdefault((site.kernel, site.index), []).append(site)
    muts: list[Mutation] = []
    for (kernel, _), sites in by_launch.items():
        measured = _launch_programs(profile, kernel)
        axis_sites = [s for s in sites if s.axis is not None]
        if measured is None or not axis_sites:
            continue
        programs, pes = measured
        dot = _uses_dot(source, kernel)
        floor = MIN_DOT_BLOCK if dot else 1
        caps = DOT_TILE_CAPS if dot else (MAX_BLOCK,)
        for cap in caps:
            changes = fill_tile(axis_sites, programs, pes, cap, floor)
            grows = any(v > s.value for s, v in changes)
            if changes:
                muts.append(_fill_mutation(kernel, changes, grows, dot, cap))
            if dot:
                k_sites = [s for s in sites if s.axis is None and s.value != DOT_K_BLOCK]
                plan_changes = changes + [(s, DOT_K_BLOCK) for s in k_sites]
                for sram in DOT_SRAM_MODES:
                    options: dict[str, Any] = {"num_stages": 2, "sram_mode": sram}
                    muts.append(_plan_mutation(kernel, plan_changes, options, dot, cap))
            else:
                muts.append(_plan_mutation(kernel, changes, {"num_stages": 2}, dot, cap))
    out: list[Mutation] = []
    seen: set[str] = set()
    for m in muts:  # one move per distinct result (caps that are not reached give the same plan)
        result = _result(m, source)
        if result is not None and result not in seen:
            seen.add(result)
            out.append(m)
    return out


def _describe(changes: list[tuple[BlockSite, int]]) -> str:
    return ", ".join(f"{s.param} {s.value} -> {v}" for s, v in changes)


def _fill_mutation(
    kernel: str, changes: list[tuple[BlockSite, int]], grows: bool, dot: bool, cap: int
) -> Mutation:
    new = "x".join(str(v) for _, v in changes)
    what = "largest tile that keeps every PE busy" if grows else "smallest tile that gives every PE work"
    return Mutation(
        name=f"fill={new}@{kernel}",
        family="plan",
        description=f"{what} in {kernel} ({_describe(changes)}; grid following)",
        apply=_plan(changes, kernel, {}),
        helps=("memory", "latency", "compute") if grows else ("compute", "latency"),
        prior=1.6,
        remedies=("bigger_commands", "fewer_bytes") if grows else ("parallelism", "balance"),
        costs=() if grows else ("bigger_commands",),
        kernel=kernel,
    )


def _plan_mutation(
    kernel: str, changes: list[tuple[BlockSite, int]], options: dict[str, Any], dot: bool, cap: int
) -> Mutation:
    opts = ", ".join(f"{k}={v!r}" for k, v in options.items())
    blocks = _describe(changes) or "blocks unchanged"
    kind = f"GEMM plan (tile <= {cap})" if dot else "streaming plan"
    return Mutation(
        name=f"plan{cap if dot else ''}={'x'.join(str(v) for _, v in changes)}+{opts}@{kernel}",
        family="plan",
        description=f"{kind} for {kernel}: {blocks}; {opts}",
        apply=_plan(changes, kernel, options),
        helps=("memory", "latency", "compute"),
        prior=(1.8 if options.get("sram_mode") == "resident" else 1.7) if dot else 1.4,
        remedies=("fewer_bytes", "overlap", "bigger_commands") if dot else ("overlap", "bigger_commands"),
        costs=(),
        kernel=kernel,
    )


def _result(m: Mutation, source: str) -> str | None:
    try:
        out = m.apply(source)
    except (MutationError, SyntaxError, ValueError, KeyError):
        return None
    return out if out != source else None
