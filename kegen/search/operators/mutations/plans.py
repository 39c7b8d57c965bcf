"""Whole-plan moves sized from the parent's measured grid (its profile), several knobs at once.

Single-knob steps reach a production plan only through a chain of improvements (a 2K GEMM seed at
64x64x32 needs tile x2 twice, BK, multi-buffering and the SRAM mode: five evaluations that each
must pay off). These moves jump there in one step, computed from what was measured, not from the
problem's name:

- `fill`: the largest (or, under-filled, the smallest) output tile that still gives every PE a
  program: grid axis blocks doubled (halved) one at a time while the launch keeps >= PEs programs
  (reaches < PEs), from the profile's programs and PEs of that kernel's launch.
- `plan`: for a dot kernel, `fill` capped at 256 (and at 128), its reduction block at 64,
  multi-buffering (`num_stages=2`) and the operands in DRAM behind the SRAM cache (preferred: since
  D22 the resident placement is paid, and the cache variant won on every GEMM-class production seed,
  docs/results/gemm_class_moves.md) or, a second variant, kept resident in SRAM; for other kernels,
  `fill` plus multi-buffering, so blocks fill all PEs and stream while the next block loads.

A plan that does not fit the local store is rejected by screening at compile time, at no
simulation cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kegen.search.operators.mutations.base import MAX_BLOCK, Mutation, MutationError
from kegen.search.operators.mutations.blocks import (
    BlockSite,
    _uses_dot,
    find_blocks,
    set_blocks,
)
from kegen.search.operators.mutations.footprint import dot_footprint, local_store_bytes
from kegen.search.operators.mutations.knobs import find_knobs, launch_options_of, set_knob

DOT_TILE_CAPS = (256, 128)
DOT_K_BLOCK = 64
PLAN_STAGES = 2  # multi-buffering: the next operand tiles load while the DPE works on these
DOT_SRAM_MODES = ("cache", "resident")  # DRAM behind the SRAM cache, or operands kept in SRAM
MIN_DOT_BLOCK = 32


def launch_programs(profile: Any, kernel: str) -> tuple[int, int, tuple[int, ...] | None] | None:
    """(programs, PEs, grid) of the largest measured launch of `kernel`, if the profile has it."""
    best: tuple[int, int, tuple[int, ...] | None] | None = None
    for launch in getattr(profile, "launches", None) or []:
        if launch.kernel == kernel and launch.programs and launch.pes_total:
            if best is None or launch.programs > best[0]:
                grid = tuple(int(g) for g in launch.grid) if getattr(launch, "grid", None) else None
                best = (int(launch.programs), int(launch.pes_total), grid)
    return best


def fill_tile(
    sites: list[BlockSite],
    programs: int,
    pes: int,
    cap: int,
    floor: int,
    fits: Callable[[dict[str, int]], bool] | None = None,
    grid: tuple[int, ...] | None = None,
) -> list[tuple[BlockSite, int]]:
    """New values of the grid-axis blocks: grown while >= `pes` programs remain, or shrunk until
    there are `pes` programs; [] when nothing changes.

    `fits(values by site key)` vetoes a growth step (the tile would not fit the local store): the
    next smallest block is tried instead. With the measured `grid` (programs per axis) a block only
    grows while its axis has more than one program (beyond that it would cover past the problem's
    extent), and the program count follows each axis's ceiling division."""
    values = {s.key: s.value for s in sites}
    counts = list(grid) if grid is not None and _prod(grid) == programs else None

    def on_grid(site: BlockSite) -> bool:
        return counts is not None and site.axis is not None and site.axis < len(counts)

    def after(site: BlockSite, grow: bool) -> tuple[int, list[int] | None]:
        """(programs, per-axis counts) once `site` is doubled (grow) or halved."""
        if counts is None or not on_grid(site):
            return (p // 2 if grow else p * 2), counts
        c = list(counts)
        c[site.axis] = -(-c[site.axis] // 2) if grow else c[site.axis] * 2  # type: ignore[index]
        return _prod(c), c

    p = programs
    if p >= 2 * pes:
        while True:
            growable = sorted(
                (
                    s
                    for s in sites
                    if values[s.key] * 2 <= cap
                    and not (on_grid(s) and counts[s.axis] <= 1)  # type: ignore[index]
                    and after(s, True)[0] >= pes
                ),
                key=lambda x: (values[x.key], x.axis or 0),
            )
            step = next(
                (s for s in growable if fits is None or fits({**values, s.key: values[s.key] * 2})), None
            )
            if step is None:
                break
            p, counts = after(step, True)
            values[step.key] *= 2
    elif p < pes:
        while p < pes:
            shrinkable = [s for s in sites if values[s.key] // 2 >= floor]
            if not shrinkable:
                break
            site = max(shrinkable, key=lambda x: (values[x.key], -(x.axis or 0)))
            p, counts = after(site, False)
            values[site.key] //= 2
    return [(s, values[s.key]) for s in sites if values[s.key] != s.value]


def _prod(xs: Any) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


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
    """`fill` and `plan` moves for every launch whose grid the profile measured; a dot kernel's plans
    are sized to fit its local store (`footprint.dot_footprint`), the reduction block lowered from
    `DOT_K_BLOCK` when only a smaller one fits."""
    by_launch: dict[tuple[str, int], list[BlockSite]] = {}
    for site in find_blocks(source):
        by_launch.setdefault((site.kernel, site.index), []).append(site)
    muts: list[Mutation] = []
    for (kernel, _), sites in by_launch.items():
        measured = launch_programs(profile, kernel)
        axis_sites = [s for s in sites if s.tiles]
        if measured is None or not axis_sites:
            continue
        programs, pes, grid = measured
        dot = _uses_dot(source, kernel)
        floor = MIN_DOT_BLOCK if dot else 1
        caps = DOT_TILE_CAPS if dot else (MAX_BLOCK,)
        k_sites = [s for s in sites if not s.tiles]
        budget = _FitModel(source, kernel, sites, profile) if dot else None
        for cap in caps:
            stages = budget.parent_stages if budget else 1
            fits = budget.checker({}, stages) if budget else None
            changes = fill_tile(axis_sites, programs, pes, cap, floor, fits, grid)
            grows = any(v > s.value for s, v in changes)
            if changes:
                muts.append(_fill_mutation(kernel, changes, grows, dot, cap))
            if dot:
                assert budget is not None
                plan_changes = budget.plan(axis_sites, k_sites, (programs, pes, grid), cap, floor)
                if plan_changes is None:
                    continue
                for sram in DOT_SRAM_MODES:
                    options: dict[str, Any] = {"num_stages": PLAN_STAGES, "sram_mode": sram}
                    muts.append(_plan_mutation(kernel, plan_changes, options, dot, cap))
            else:
                muts.append(_plan_mutation(kernel, changes, {"num_stages": PLAN_STAGES}, dot, cap))
    out: list[Mutation] = []
    seen: set[str] = set()
    for m in muts:  # one move per distinct result (caps that are not reached give the same plan)
        result = _result(m, source)
        if result is not None and result not in seen:
            seen.add(result)
            out.append(m)
    return out


class _FitModel:
    """Which block values of a dot kernel's launch fit the local store of the measured device.

    The model is trusted only when it admits the parent itself (which compiled): a kernel it
    misjudges is not filtered at all (screening's compile then rejects an overflowing plan)."""

    def __init__(self, source: str, kernel: str, sites: list[BlockSite], profile: Any) -> None:
        self.source, self.kernel, self.sites = source, kernel, sites
        opts = launch_options_of(source).get(kernel, {})
        self.parent_stages = int(opts.get("num_stages", 1) or 1)
        capacity = local_store_bytes(str(getattr(profile, "device", "") or ""), bool(opts.get("dual_core")))
        parent = dot_footprint(source, kernel, self._params({}), self.parent_stages)
        self.capacity = (
            capacity if capacity is not None and parent is not None and parent <= capacity else None
        )

    def _params(self, values: dict[str, int]) -> dict[str, int]:
        return {s.param: values.get(s.key, s.value) for s in self.sites}

    def fits(self, values: dict[str, int], stages: int) -> bool:
        if self.capacity is None:
            return True
        need = dot_footprint(self.source, self.kernel, self._params(values), stages)
        return need is None or need <= self.capacity

    def checker(self, fixed: dict[str, int], stages: int) -> Callable[[dict[str, int]], bool]:
        return lambda values: self.fits({**fixed, **values}, stages)

    def plan(
        self,
        axis_sites: list[BlockSite],
        k_sites: list[BlockSite],
        measured: tuple[int, int, tuple[int, ...] | None],
        cap: int,
        floor: int,
    ) -> list[tuple[BlockSite, int]] | None:
        """The plan's block changes: the filled tile (under `cap`) and reduction block (up to
        `DOT_K_BLOCK`) that fit multi-buffered, the largest tile first (it sets the operand reuse),
        then the largest reduction block; None when not even the parent's tile fits."""
        best: tuple[int, int, list[tuple[BlockSite, int]]] | None = None
        for k in _k_choices(k_sites):
            fits = self.checker({s.key: k for s in k_sites}, PLAN_STAGES)
            changes = fill_tile(axis_sites, *measured[:2], cap, floor, fits, measured[2])
            tile = {s.key: v for s, v in changes}
            if not fits(tile):
                continue
            area = _prod(tile.get(s.key, s.value) for s in axis_sites)
            if best is None or (area, k) > best[:2]:
                best = (area, k, changes + [(s, k) for s in k_sites if s.value != k])
        return best[2] if best else None


def _k_choices(k_sites: list[BlockSite]) -> list[int]:
    """Reduction blocks to try, largest first: `DOT_K_BLOCK`, then halving down to 16."""
    if not k_sites:
        return [0]
    return [DOT_K_BLOCK // (2**i) for i in range(3)]


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
        prior=(1.7 if options.get("sram_mode") == "resident" else 1.8) if dot else 1.4,
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
