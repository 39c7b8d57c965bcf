"""Properties of the timing model over random traces and random machine parameters."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest

from mtia_sim.counters import UNIT_NAMES
from mtia_sim.events import CommandEvent
from mtia_sim.machine import MachineDescription, load_machine
from mtia_sim.timing import SRAM_MODES, TimingResult, simulate
from mtia_sim.timing.fluid import FluidBandwidth, Transfer
from mtia_sim.timing.synthetic import random_traces

SEEDS = range(12)
EPS = 1e-6


def _random_machine(rng: random.Random, base: MachineDescription) -> MachineDescription:
    """The same chip shape with every latency, bandwidth and throughput scaled at random."""
    changes = {}
    for f in dataclasses.fields(base):
        if f.name in ("name", "description", "dram_kind", "pe_rows", "pe_cols", "cores_per_pe",
                      "local_store_bytes", "sram_bytes", "dram_bytes", "dpe_tile_m", "dpe_tile_n", "dpe_tile_k"):
            continue
        value = getattr(base, f.name)
        if f.name == "command_queue_depth":
            changes[f.name] = rng.randint(1, 32)
        elif f.name == "dma_max_in_flight":
            changes[f.name] = rng.randint(1, 4)
        elif f.name == "sram_line_bytes":
            changes[f.name] = rng.choice([32, 64, 128, 512])
        elif isinstance(value, float):
            changes[f.name] = value * rng.uniform(0.1, 10.0) if value else rng.choice([0.0, rng.uniform(0, 100)])
    return dataclasses.replace(base, **changes)


def _diff_free(a: list, b: list) -> bool:
    """Traces equal, comparing span address arrays by value."""
    return repr(a) == repr(b)


def _check_schedule(r: TimingResult) -> None:
    """Invariants of any schedule: causality, in-order units, dependencies, fences/ends."""
    by_unit: dict[tuple[int, object], list] = {}
    for rec in r.commands:
        assert rec.issue <= rec.start + EPS <= rec.end + 2 * EPS
        assert rec.end <= r.kernel_cycles + EPS
        by_unit.setdefault((rec.pe, rec.unit), []).append(rec)
    for (_, unit), recs in by_unit.items():
        slots = r.machine.dma_max_in_flight if unit.name == "DMA" else 1
        for a, b in zip(recs, recs[1:], strict=False):  # issue order == start order
            assert b.start >= a.start - EPS
        for i, b in enumerate(recs):  # never more than `slots` in flight at once
            assert sum(1 for a in recs[:i] if a.end > b.start + EPS) < slots
    by_pe: dict[int, list] = {}
    for rec in r.commands:
        by_pe.setdefault(rec.pe, []).append(rec)
    for recs in by_pe.values():
        for i, b in enumerate(recs):
            for a in recs[:i]:
                ea, eb = a.event, b.event
                conflict = any(w.overlaps(x) for w in eb.writes for x in ea.reads + ea.writes) or \
                    any(x.overlaps(w) for x in eb.reads for w in ea.writes)
                if conflict:
                    assert b.start >= a.end - EPS
    for prog in r.programs:  # every cycle of a program is busy or a named stall
        assert prog.accounted_cycles == pytest.approx(prog.cycles, abs=1e-6 * max(1.0, prog.cycles))
        mine = [c for c in r.commands if c.program == prog.program]
        assert all(c.end <= prog.end + EPS for c in mine)
        assert all(c.issue >= prog.start - EPS for c in mine)


def _functional_view(r: TimingResult) -> list[tuple]:
    """Everything about a run except time."""
    return [(c.pe, c.core, c.program, c.event.op, c.event.tag, c.event.flops, c.event.elements)
            for c in sorted(r.commands, key=lambda c: (c.program, id(c.event)))]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_traces_keep_every_invariant(seed):
    rng = random.Random(seed)
    m = load_machine(rng.choice(["mtia-2i", "mtia-v1", "mtia-300"]))
    traces = random_traces(rng, m, programs=rng.randint(1, 16), commands=rng.randint(1, 16))
    r = simulate(m, traces)
    _check_schedule(r)
    roof = r.counters.roofline
    if roof.flops:
        assert roof.achieved_flops <= roof.attainable_flops * (1 + 1e-9)
        assert roof.attainable_flops <= roof.compute_roof * (1 + 1e-9)
    for level in ("dram", "sram"):
        assert r.counters.bandwidth[level]["achieved_bw"] <= r.counters.bandwidth[level]["peak_bw"] * (1 + 1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_parameters_change_only_time(seed):
    rng = random.Random(1000 + seed)
    base = load_machine("mtia-2i")
    traces = random_traces(rng, base, programs=10, commands=10)
    pristine = copy.deepcopy(traces)
    ref = simulate(base, traces)
    other_machine = _random_machine(rng, base)
    other = simulate(other_machine, traces, sram_mode=rng.choice(SRAM_MODES),
                     sram_cache_bytes=rng.choice([None, 0, 4096, 1 << 16]),
                     launch=rng.choice(["launch", "replacement", "none"]))
    _check_schedule(other)
    assert _diff_free(traces, pristine)  # the timing model never alters what the functional model recorded
    assert _functional_view(ref) == _functional_view(other)
    for name in UNIT_NAMES:
        a, b = ref.counters.totals[name], other.counters.totals[name]
        assert (a.commands, a.flops, a.elements) == (b.commands, b.flops, b.elements)
        # the SRAM cache moves DRAM bytes to the SRAM (how many depends on timing); a missed line is
        # filled whole, so read totals never fall below what the commands read (the events' bytes)
        read = sum(sum(c.event.bytes_read.values()) for c in ref.commands if c.event.unit.name == name)
        assert sum(a.bytes_read.values()) >= read * (1 - 1e-12)
        assert sum(b.bytes_read.values()) >= read * (1 - 1e-12)
        assert sum(a.bytes_written.values()) == pytest.approx(sum(b.bytes_written.values()))
        for level in ("local", "remote_local"):
            assert a.bytes_read.get(level, 0) == b.bytes_read.get(level, 0)
        if name != "CORE":
            assert a.busy_cycles >= 0 and b.busy_cycles >= 0


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_counters_add_up(seed):
    rng = random.Random(2000 + seed)
    m = load_machine("mtia-2i")
    traces = random_traces(rng, m, programs=12, commands=12)
    r = simulate(m, traces)
    c = r.counters
    events = [e for t in traces for e in t.events if isinstance(e, CommandEvent)]
    assert sum(u.commands for n, u in c.totals.items() if n != "CORE") == len(events) == len(r.commands)
    assert c.flops == sum(e.flops for e in events)
    for name in UNIT_NAMES:
        per_pe = [p.units[name] for p in c.pes.values()]
        assert c.totals[name].busy_cycles == pytest.approx(sum(u.busy_cycles for u in per_pe))
        assert c.totals[name].commands == sum(u.commands for u in per_pe)
        assert c.totals[name].stall_total == pytest.approx(sum(u.stall_total for u in per_pe))
    dram = sum(rec.bytes_read.get("dram", 0) + rec.bytes_written.get("dram", 0) for rec in r.commands)
    dram += sum(p.mem_bytes.get("dram", 0) for p in r.programs)  # scalar loads and stores
    assert c.roofline.dram_bytes == pytest.approx(dram)
    # every command's DRAM bytes are served by the DRAM or (cache hits) by the SRAM; a missed line
    # is filled whole, which adds at most one line per miss
    served = sum(sum(rec.bytes_read.values()) + sum(rec.bytes_written.values()) for rec in r.commands)
    asked = sum(sum(e.bytes_read.values()) + sum(e.bytes_written.values()) for e in events)
    misses = r.sram_cache.miss_lines if r.sram_cache is not None else 0
    assert asked * (1 - 1e-12) <= served <= asked + misses * m.sram_line_bytes
    busy = 0.0  # a unit is busy while any of its commands runs (DMA commands may overlap)
    by_unit: dict[tuple, list] = {}
    for rec in r.commands:
        by_unit.setdefault((rec.pe, rec.unit), []).append((rec.start, rec.end))
    for spans in by_unit.values():
        until = 0.0
        for start, end in sorted(spans):
            busy += max(0.0, end - max(start, until))
            until = max(until, end)
    assert sum(u.busy_cycles for n, u in c.totals.items() if n != "CORE") == pytest.approx(busy)
    # utilisation is a fraction of the makespan for every PE unit
    for p in c.pes.values():
        for name, u in p.units.items():
            assert u.busy_cycles <= c.kernel_cycles * c.lanes(name) + EPS
    assert sum(p.instructions for p in r.programs) == sum(t.instructions for t in traces)
    d = c.to_dict()
    assert d["flops"] == c.flops and set(d["totals"]) == set(UNIT_NAMES)
    # every cycle of every core that ran programs lands in a named counter
    assert sum(c.core_time.values()) == pytest.approx(c.kernel_cycles * c.core_slots)
    assert c.core_slots == len({(p.pe, p.core) for p in r.programs})


def test_fluid_shares_never_exceed_capacity_and_are_max_min_fair():
    rng = random.Random(7)
    for _ in range(50):
        fluid = FluidBandwidth()
        caps = {"dram": rng.uniform(10, 200), "sram": rng.uniform(100, 2000)}
        for i in range(rng.randint(1, 20)):
            shares = []
            for res in rng.sample(["dram", "sram", "ls"], rng.randint(1, 3)):
                if res == "ls":
                    shares.append((("ls", rng.randrange(4)), rng.uniform(0.2, 1.0), 700.0))
                else:
                    shares.append((res, rng.uniform(0.2, 1.0), caps[res]))
            fluid.add(Transfer(owner=i, remaining=1000.0, shares=shares), 0.0)
        fluid.rebalance()
        used: dict = {}
        capacity: dict = {}
        for t in fluid.active:
            assert t.rate > 0
            for res, w, cap in t.shares:
                used[res] = used.get(res, 0.0) + w * t.rate
                capacity[res] = cap
        for res, u in used.items():
            assert u <= capacity[res] * (1 + 1e-9)
        # max-min fairness: every transfer crosses a saturated resource where nobody is faster
        for t in fluid.active:
            assert any(used[res] >= capacity[res] * (1 - 1e-9)
                       and all(o.rate <= t.rate * (1 + 1e-9) for o in fluid.active
                               if any(r2 == res for r2, _, _ in o.shares))
                       for res, _, _ in t.shares)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_bandwidth_timeline_never_exceeds_capacity(seed):
    rng = random.Random(3000 + seed)
    m = load_machine("mtia-2i")
    r = simulate(m, random_traces(rng, m, programs=24, commands=12))
    assert r.bandwidth_timeline, "DMA traffic leaves a timeline"
    for cycle, dram, sram in r.bandwidth_timeline:
        assert 0 <= cycle <= r.kernel_cycles + EPS
        assert dram <= m.dram_bytes_per_cycle * (1 + 1e-9) and sram <= m.sram_bytes_per_cycle * (1 + 1e-9)
    assert r.bandwidth_timeline[-1][1:] == (0.0, 0.0)  # everything drained at the end
