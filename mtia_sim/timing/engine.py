"""The event-driven replay of all programs of a launch on the modelled PEs.

Cores step through their program's events (instructions at `core_cpi`, a doorbell costs
`command_issue_cycles`); commands enter per-PE, per-unit in-order queues; the command processor's
scoreboard holds a command until every earlier command of its PE it conflicts with on local-store
ranges (RAW, WAR, WAW) is done; fences and the program's end wait for the core's commands; transfers
share DRAM, SRAM, local-store and NoC bandwidth through the fluid model. One heap of timed events,
O(events log events) apart from the fair-share recomputation when a shared transfer starts or ends,
which is linear in the transfers in flight (at most `dma_max_in_flight` per PE); transfers on
resources nobody else uses start and end without it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

from mtia_sim.events import CommandEvent, CoreEvent, EndEvent, FenceEvent, MemLevel, ProgramTrace
from mtia_sim.isa import Unit
from mtia_sim.machine import MachineDescription
from mtia_sim.timing import costs
from mtia_sim.timing.fluid import FluidBandwidth, Transfer
from mtia_sim.timing.replay_state import UNITS, Cmd, CoreState, PEState, ScalarAccess, UnitQueue
from mtia_sim.timing.result import CommandRecord, ProgramRecord
from mtia_sim.timing.sram_cache import SramCache

_COMPLETE, _CORE = 0, 1  # at equal times, finish work before cores look at it
_SAME_TIME = 1e-6  # cycles: events closer than this are handled before bandwidth is rebalanced
SCALAR_MEM = "scalar_mem"  # core stall: waiting for its own loads/stores to DRAM or SRAM


class Replay:
    """One replay of a launch. Use `run()` once."""

    def __init__(self, machine: MachineDescription, traces: list[ProgramTrace], *, sram_mode: str = "cache",
                 sram_cache_bytes: int | None = None) -> None:
        self.m = machine
        self.traces = traces
        capacity = machine.sram_bytes if sram_cache_bytes is None else sram_cache_bytes
        self.cache = SramCache(sram_mode, capacity, machine.sram_line_bytes)
        self.fillers: dict[int, Cmd] = {}  # fill id -> the command whose SRAM fill is in flight
        self.fill_seq = 0
        self.heap: list[tuple[float, int, int, int, object, int]] = []
        self.seq = itertools.count()
        self.now = 0.0
        self.events = 0
        self.fluid = FluidBandwidth()
        self.fluid_dirty = False
        self.fluid_epoch = 0  # only the latest "next transfer finishes" event is live
        self.link_ids = itertools.count()
        self.pes: dict[int, PEState] = {}
        self.cores: list[CoreState] = []
        self.commands: list[CommandRecord] = []
        self.programs: list[ProgramRecord] = []
        self.timeline: list[tuple[float, float, float]] = []  # (cycle, DRAM B/cycle, SRAM B/cycle)
        self._place()

    # ---- set-up --------------------------------------------------------------------------
    def _place(self) -> None:
        by_core: dict[tuple[int, int], list[int]] = {}
        for i, tr in enumerate(self.traces):
            if not 0 <= tr.pe < self.m.num_pes:
                raise ValueError(f"program {tr.program_id} runs on PE {tr.pe}, but {self.m.name} has PEs "
                                 f"0..{self.m.num_pes - 1}; map programs with the same machine description")
            if not 0 <= tr.core < self.m.cores_per_pe:
                raise ValueError(f"program {tr.program_id} runs on core {tr.core}, but {self.m.name} has "
                                 f"{self.m.cores_per_pe} cores per PE")
            by_core.setdefault((tr.pe, tr.core), []).append(i)
        for (pe, core), progs in sorted(by_core.items()):
            self.pes.setdefault(pe, PEState(self.m.dma_max_in_flight))
            c = CoreState(pe, core, progs)
            self.cores.append(c)
            self._next_program(c, 0.0)
            self._push(0.0, _CORE, 0, c)

    # ---- the event queue -----------------------------------------------------------------
    def _push(self, time: float, prio: int, kind: int, obj: object, version: int = 0) -> None:
        heapq.heappush(self.heap, (time, prio, next(self.seq), kind, obj, version))

    def run(self) -> float:
        """Replay everything; returns the makespan in cycles."""
        heap = self.heap
        while heap:
            if self.fluid_dirty and heap[0][0] > self.now + _SAME_TIME:
                self._rebalance()
                continue
            time, _, _, kind, obj, version = heapq.heappop(heap)
            self.now = max(self.now, time)
            self.events += 1
            if kind == 0:
                self._run_core(obj)  # type: ignore[arg-type]
            elif kind == 1:
                self._fixed_done(obj)  # type: ignore[arg-type]
            elif kind == 3:
                self._scalar_latency_done(obj)  # type: ignore[arg-type]
            elif version == self.fluid_epoch:
                self._transfers_done()
            if not heap and self.fluid_dirty:
                self._rebalance()
        stuck = [c for c in self.cores if c.prog is not None]
        if stuck:
            c = stuck[0]
            raise RuntimeError(f"timing replay deadlocked: PE {c.pe} core {c.core} is blocked ({c.blocked}) "
                               "with nothing in flight; this is a bug in mtia_sim.timing")
        return self.now

    # ---- cores ---------------------------------------------------------------------------
    def _next_program(self, c: CoreState, start: float) -> None:
        if not c.programs:
            c.prog = None
            return
        i = c.programs.popleft()
        tr = self.traces[i]
        c.prog = ProgramRecord(program=i, program_id=tr.program_id, pe=c.pe, core=c.core, start=start)
        self.programs.append(c.prog)
        c.events = tr.events
        c.idx = 0
        c.time = start
        c.paid = False
        c.issued = {}

    def _block(self, c: CoreState, reason: str) -> None:
        c.blocked = reason
        c.blocked_since = self.now

    def _unblock(self, c: CoreState) -> None:
        if c.blocked is None:
            return
        if c.blocked == SCALAR_MEM:
            reason = SCALAR_MEM
        else:
            reason = f"{c.blocked}_{c.wake_unit.name if c.wake_unit is not None else 'ANY'}"
        assert c.prog is not None
        waited = self.now - c.blocked_since
        if waited > 0:
            c.prog.stalls[reason] = c.prog.stalls.get(reason, 0.0) + waited
        c.blocked = None
        c.wake_unit = None

    def _wait_for(self, c: CoreState, cmds: list[Cmd], reason: str) -> bool:
        """Block the core until `cmds` are done; False when they already are."""
        pending = [x for x in cmds if not x.done]
        for unit, xs in c.issued.items():  # prune finished commands
            c.issued[unit] = [x for x in xs if not x.done]
        if not pending:
            return False
        c.waiting = set(pending)
        for x in pending:
            x.waiters.append(c)
        self._block(c, reason)
        return True

    def _run_core(self, c: CoreState) -> None:
        if c.blocked is not None:
            self._unblock(c)
        now = self.now
        m = self.m
        c.time = max(c.time, now)
        if c.pending_mem:
            self._scalar_access(c)
            return
        while c.prog is not None:
            prog = c.prog
            if c.idx < len(c.events):
                ev = c.events[c.idx]
            else:
                ev = None  # a trace without EndEvent ends like one
            if isinstance(ev, CoreEvent):
                cyc = ev.instructions * m.core_cpi
                c.time += cyc
                prog.busy_cycles += cyc
                prog.instructions += ev.instructions
                c.idx += 1
                if ev.mem_accesses:
                    c.pending_mem = list(ev.mem_accesses)
                if c.pending_mem:
                    if c.time > now:
                        self._push(c.time, _CORE, 0, c)
                        return
                    self._scalar_access(c)
                    return
                continue
            if isinstance(ev, CommandEvent) and not c.paid:
                c.time += m.command_issue_cycles
                prog.busy_cycles += m.command_issue_cycles
                c.paid = True
            if c.time > now:
                heap = self.heap
                if self.fluid_dirty or (heap and heap[0][0] <= c.time):
                    self._push(c.time, _CORE, 0, c)
                    return
                self.now = now = c.time  # nothing else happens before: run ahead without the heap
                self.events += 1
            if isinstance(ev, CommandEvent):
                unit = self.pes[c.pe].units[ev.unit] if ev.unit in UNITS else None
                if unit is None:
                    raise ValueError(f"program {prog.program_id}: command {ev.op!r} names unit {ev.unit!r}; "
                                     "commands go to DMA, DPE, SIMD, RED or MLU")
                if len(unit.queue) >= m.command_queue_depth:
                    unit.blocked_cores.append(c)
                    c.wake_unit = ev.unit
                    self._block(c, "queue_full")
                    return
                self._issue(c, ev)
                c.paid = False
                c.idx += 1
                continue
            if isinstance(ev, FenceEvent):
                c.idx += 1
                cmds = [x for u, xs in c.issued.items() if ev.unit_mask & (1 << int(u)) for x in xs]
                if self._wait_for(c, cmds, "fence_wait"):
                    return
                continue
            if ev is None or isinstance(ev, EndEvent):
                if self._wait_for(c, [x for xs in c.issued.values() for x in xs], "end_wait"):
                    return
                prog.end = now
                self._next_program(c, now)  # job replacement is paid between launches, not programs
                continue
            raise TypeError(f"program {prog.program_id}: unknown event {ev!r} in its trace")

    # ---- scalar loads and stores ------------------------------------------------------------
    def _scalar_access(self, c: CoreState) -> None:
        """Make the next level's scalar accesses: the core stalls for each access's latency (an
        in-order core waits for every load), then its bytes (at least a burst per access) cross
        the shared memory's bandwidth."""
        level_name, count, nbytes = c.pending_mem.pop(0)
        level = MemLevel(level_name)
        if level not in (MemLevel.DRAM, MemLevel.SRAM):
            raise ValueError(f"scalar accesses to {level_name!r}: CoreEvent.mem_accesses names 'dram' or "
                             "'sram' (local-store accesses are part of the instruction cost)")
        assert c.prog is not None
        if nbytes:
            c.prog.mem_bytes[level.value] = c.prog.mem_bytes.get(level.value, 0) + nbytes
        c.prog.mem_accesses += count
        latency = self.m.dram_latency_cycles if level == MemLevel.DRAM else self.m.sram_latency_cycles
        traffic = float(max(nbytes, count * self.m.dma_burst_bytes)) if count else float(nbytes)
        self._block(c, SCALAR_MEM)
        self._push(self.now + count * latency, _COMPLETE, 3, ScalarAccess(c, level, traffic))

    def _scalar_latency_done(self, acc: ScalarAccess) -> None:
        if acc.traffic <= 0:
            self._push(self.now, _CORE, 0, acc.core)
            return
        res = "dram" if acc.level == MemLevel.DRAM else "sram"
        cap = self.m.dram_bytes_per_cycle if res == "dram" else self.m.sram_bytes_per_cycle
        tr = Transfer(owner=acc, remaining=acc.traffic, shares=[(res, 1.0, cap)])
        self.fluid.advance(self.now)
        self.fluid.add(tr, self.now)
        self.fluid_dirty = True

    # ---- commands ------------------------------------------------------------------------
    def _issue(self, c: CoreState, ev: CommandEvent) -> None:
        assert c.prog is not None
        rec = CommandRecord(pe=c.pe, core=c.core, program=c.prog.program, event=ev, issue=self.now,
                            start=0.0, end=0.0, ideal_cycles=costs.ideal_cycles(self.m, ev))
        self.commands.append(rec)
        cmd = Cmd(rec)
        pe = self.pes[c.pe]
        ranges = ev.reads + ev.writes if ev.writes and ev.reads else (ev.reads or ev.writes)
        if ranges:
            if len(ranges) == 1:
                lo, hi = ranges[0].start, ranges[0].end
            else:
                lo, hi = min(r.start for r in ranges), max(r.end for r in ranges)
            cmd.lo, cmd.hi = lo, hi
            live = [x for x in pe.outstanding if not x.done]
            pe.outstanding = live
            unit_id = ev.unit
            in_order = len(pe.units[unit_id].running) == 1
            for other in live:  # with one slot, earlier commands of the same unit finish first anyway
                if other.lo < hi and lo < other.hi and (other.unit != unit_id or not in_order) \
                        and cmd.conflicts(other):
                    cmd.deps_left += 1
                    other.dependents.append(cmd)
        pe.outstanding.append(cmd)
        mine = c.issued.setdefault(ev.unit, [])
        if len(mine) >= 64:
            mine[:] = [x for x in mine if not x.done]
        mine.append(cmd)
        unit = pe.units[ev.unit]
        unit.queue.append(cmd)
        self._try_start(unit)

    def _try_start(self, unit: UnitQueue) -> None:
        """Start queued commands in order while a slot is free and the head's dependencies are done."""
        started = False
        while unit.queue:
            try:
                slot = unit.running.index(None)
            except ValueError:
                break
            head = unit.queue[0]
            if head.head_at is None:
                head.head_at = self.now
            if head.deps_left:
                break
            unit.queue.popleft()
            unit.running[slot] = head
            rec = head.rec
            rec.slot = slot
            rec.start = self.now
            rec.wait_unit = head.head_at - rec.issue
            rec.wait_dependency = self.now - head.head_at
            ev = rec.event
            if ev.spans and (MemLevel.DRAM in ev.bytes_read or MemLevel.DRAM in ev.bytes_written):
                rec.routed = self.cache.route(ev, self.fill_seq + 1)
                if rec.routed is not None and rec.routed.fill_lines:
                    self.fill_seq += 1
                    self.fillers[rec.routed.fill_id] = head
            fixed = costs.fixed_cycles(self.m, rec.pe, ev, rec.routed)
            self._push(self.now + fixed, _COMPLETE, 1, head)
            started = True
        if started and unit.blocked_cores:
            blocked, unit.blocked_cores = unit.blocked_cores, []
            for core in blocked:
                self._push(self.now, _CORE, 0, core)

    def _fixed_done(self, cmd: Cmd) -> None:
        rec = cmd.rec
        volume, shares = costs.transfer_demands(self.m, rec.pe, rec.event, next(self.link_ids), rec.routed)
        if volume <= 0:
            self._complete(cmd)
            return
        tr = Transfer(owner=cmd, remaining=volume, shares=shares)
        cmd.transfer_start = self.now
        cmd.transfer_alone = volume / costs.uncontended_rate(shares)
        self.fluid.add(tr, self.now)
        if self.fluid.is_private(tr):  # nobody else's rate changes: no rebalance
            tr.rate = costs.uncontended_rate(shares)
            self._push(self.now + tr.remaining / tr.rate, _COMPLETE, 2, None, self.fluid_epoch)
        else:
            self.fluid_dirty = True  # rate 0 until the rebalance (at this time)

    def _transfers_done(self) -> None:
        """The earliest transfer(s) finished: complete them; rates are rebalanced afterwards."""
        self.fluid.advance(self.now)
        active = self.fluid.active
        tol = _SAME_TIME + self.now * 1e-12  # float time resolution grows with the clock
        finished = [tr for tr in active if tr.remaining <= tr.rate * tol]
        if not finished:  # rounding, or a duplicate event: re-solve and reschedule
            self.fluid_dirty = True
            return
        private = all(self.fluid.is_private(tr) for tr in finished)
        self.fluid.remove_all(finished)
        for tr in finished:
            if isinstance(tr.owner, ScalarAccess):
                self._push(self.now, _CORE, 0, tr.owner.core)
                continue
            cmd: Cmd = tr.owner
            cmd.rec.wait_bandwidth = max(0.0, (self.now - cmd.transfer_start) - cmd.transfer_alone)
            self._complete(cmd)
        if not private:
            self.fluid_dirty = True
        elif not self.fluid_dirty:  # others keep their rates; the next of them to finish needs an event
            finish = self.fluid.next_finish()
            if finish is not None:
                self._push(self.now + finish, _COMPLETE, 2, None, self.fluid_epoch)

    def _rebalance(self) -> None:
        """Recompute fair shares and schedule one event for the next transfer to finish."""
        self.fluid_dirty = False
        self.fluid.advance(self.now)
        finish = self.fluid.rebalance()
        self.fluid_epoch += 1
        sample = (self.now, self.fluid.dram_rate, self.fluid.sram_rate)
        if self.timeline and self.timeline[-1][0] == self.now:
            self.timeline[-1] = sample
        elif not self.timeline or self.timeline[-1][1:] != sample[1:]:
            self.timeline.append(sample)
        if finish is not None:
            self._push(self.now + finish, _COMPLETE, 2, None, self.fluid_epoch)

    def _complete(self, cmd: Cmd) -> None:
        rec = cmd.rec
        routed = rec.routed
        if routed is not None and routed.waits:  # merged misses: done when those fills are
            waits, routed.waits = routed.waits, set()
            for fid in waits:
                filler = self.fillers.get(fid)
                if filler is not None and not filler.done:
                    cmd.merge_left += 1
                    filler.merged.append(cmd)
            if cmd.merge_left:
                return
        rec.end = self.now
        cmd.done = True
        if routed is not None and routed.fill_lines:
            self.cache.fill(routed)
            del self.fillers[routed.fill_id]
        if cmd.merged:
            merged, cmd.merged = cmd.merged, []
            for other in merged:
                other.merge_left -= 1
                if not other.merge_left:
                    self._complete(other)
        pe = self.pes[rec.pe]
        unit = pe.units[rec.event.unit]
        unit.running[rec.slot] = None
        for core in cmd.waiters:
            core.waiting.discard(cmd)
            if not core.waiting and core.blocked is not None:
                core.wake_unit = rec.event.unit
                self._push(self.now, _CORE, 0, core)
        cmd.waiters = []
        self._try_start(unit)
        dependents, cmd.dependents = cmd.dependents, []
        for d in dependents:  # the head of another unit's queue may be free to go now
            d.deps_left -= 1
            if not d.deps_left:
                self._try_start(pe.units[d.rec.event.unit])


def iter_units() -> Iterator[Unit]:
    """The units that take commands, in track order."""
    return iter(UNITS)
