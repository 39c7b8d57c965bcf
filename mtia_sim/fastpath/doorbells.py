"""The doorbell fast path: replayed commands run in native code inside the MMIO store.

A command the core has seen twice has a plan (`Core._doorbell`, D8): a closure over its operand
views and the CommandEvent it produces. When the closure is one of the simple kinds
(`mtia_sim.units.native`: byte copies, fills, one numpy ufunc over contiguous operands), the plan
is also registered here: its descriptor bytes and PE as a key in a native hash table, and its ops as
native records. The next DOORBELL store of the same descriptor on the same PE is then handled by
`mtia_fast_doorbell` (`ir.py`) without calling Python: it runs the ops at once
(doorbells stay synchronous, so the core sees exactly what the Python path would show it) and
appends a queue row (plan, pc, instruction count, scalar-access totals). Python turns the rows into
the same trace events later (`Core._drain`), before it handles anything else and when the program
ends.

Bit-identical by construction: copies and fills move the same bytes as numpy (operands that
overlap are left to numpy); a ufunc runs numpy's own inner loop for that type, called as numpy's
trivial-loop path calls it (one call over contiguous, aligned operands), and each loop is checked
against numpy on NaN payloads, infinities and subnormals before it is used.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from mtia_sim.events import CommandEvent, CoreEvent, FenceEvent
from mtia_sim.fastpath.encode import encode
from mtia_sim.fastpath.ir import fast_ir
from mtia_sim.fastpath.layout import (
    ADDR_FIRST,
    ADDR_LAST,
    ANY_PE,
    F_ACCESS_PTR,
    F_BUDGET,
    F_COUNT_PTR,
    F_ENABLED,
    F_HASH,
    F_KEYS,
    F_MASK,
    F_META,
    F_OPS,
    F_PE,
    F_QCAP,
    F_QCOUNT,
    F_QUEUE,
    F_STACK_BASE,
    F_STACK_HOST,
    F_STACK_SIZE,
    F_TABLE,
    FENCE_ROW,
    KEY_WORDS,
    META_WORDS,
    OP_WORDS,
    OPS_PER_PLAN,
    ROW_WORDS,
    STATE_WORDS,
)
from mtia_sim.fastpath.reloc import Relocation, shifted_event
from mtia_sim.memory import MemorySystem
from mtia_sim.units.native import ops_of

QUEUE_ROWS = 4096
PLANS_PER_KEY = 4  # plans per (descriptor without addresses, PE): e.g. a tensor in DRAM and one in SRAM
EVENT_CACHE = 1 << 16  # moved events kept (all plans together), shared CoreEvents
_NEW = object.__new__
ACCESS_WORDS = 4  # the queue row keeps 4 scalar-access counter words (2 ranges: SRAM, DRAM)


@functools.cache
def _engine() -> tuple[int, Any] | None:
    """(address of mtia_fast_write, engine keeping it alive), or None without a host JIT."""
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        mod = llvm.parse_assembly(fast_ir())
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        return engine.get_function_address("mtia_fast_write"), engine
    except Exception:  # pragma: no cover - depends on the host's LLVM build
        return None


class FastDoorbells:
    """Native plan table, op records and event queue of one core (see the module doc)."""

    def __init__(self, mem: MemorySystem, stack: np.ndarray, stack_base: int, count_addr: int,
                 access: np.ndarray, max_plans: int) -> None:
        native = _engine()
        if native is None:
            raise RuntimeError("host JIT unavailable")
        self.function = native[0]
        slots = 1 << max(2 * max_plans - 1, 1).bit_length()
        self.max_plans = max_plans
        self.state = np.zeros(STATE_WORDS, dtype=np.int64)
        self.table = np.zeros(2 * slots, dtype=np.int64)  # (hash, plan + 1) per slot; 0 = empty
        self.keys = np.zeros((max_plans, KEY_WORDS), dtype=np.int64)
        self.ops = np.zeros((max_plans, OPS_PER_PLAN, OP_WORDS), dtype=np.int64)
        self.meta = np.zeros((max_plans, META_WORDS), dtype=np.int64)  # relocations (reloc.py)
        self.mem = mem
        self.queue = np.zeros((QUEUE_ROWS, ROW_WORDS), dtype=np.int64)
        if access.size < ACCESS_WORDS:
            access = np.zeros(ACCESS_WORDS, dtype=np.int64)
        self._access = access  # keep alive (its address is in the state)
        s = self.state
        s[F_ENABLED] = int(access.size == ACCESS_WORDS)
        s[F_STACK_BASE], s[F_STACK_SIZE], s[F_STACK_HOST] = stack_base, stack.size, stack.ctypes.data
        s[F_TABLE], s[F_MASK], s[F_KEYS] = self.table.ctypes.data, slots - 1, self.keys.ctypes.data
        s[F_OPS], s[F_QUEUE], s[F_QCAP] = self.ops.ctypes.data, self.queue.ctypes.data, QUEUE_ROWS
        s[F_COUNT_PTR], s[F_ACCESS_PTR] = count_addr, access.ctypes.data
        s[F_META] = self.meta.ctypes.data
        self.words = (ctypes.c_int64 * STATE_WORDS).from_address(self.state.ctypes.data)
        self._stack = stack
        self.templates: list[Any] = []  # plan -> first CommandEvent
        self.events: list[dict[int, Any]] = []  # plan -> {pc: CommandEvent}
        self.shifted: list[dict[tuple[int, ...], Any]] = []  # plan -> {(pc, deltas): CommandEvent}
        self.relocs: list[Relocation] = []
        self.per_key: dict[tuple[bytes, int], int] = {}  # (masked descriptor, PE or ANY_PE) -> plans
        self.seen_masked: set[bytes] = set()
        self._keep: list[Any] = []  # plan -> the arrays its records point into
        self.known: dict[tuple[bytes, int], int] = {}  # (descriptor, PE) -> plan, or -1: not native
        self.handled = 0  # commands the native path ran (counted when drained), for tests and benchmarks
        self._core_events: dict[int, CoreEvent] = {}  # instructions -> shared CoreEvent (no accesses)
        self._shifted_count = 0

    @property
    def enabled(self) -> bool:
        return bool(self.words[F_ENABLED])

    @enabled.setter
    def enabled(self, on: bool) -> None:
        self.words[F_ENABLED] = int(on)

    def begin(self, pe: int, budget: int) -> None:
        """Before a program runs on `pe` with `budget` commands left."""
        w = self.words
        w[F_PE], w[F_BUDGET], w[F_QCOUNT] = pe, budget, 0

    def set_budget(self, budget: int) -> None:
        self.words[F_BUDGET] = budget

    @property
    def pending(self) -> int:
        return int(self.words[F_QCOUNT])

    def take(self) -> list[list[int]]:
        """The queued rows (plan or FENCE_ROW, pc, instructions, 4 access words, fence mask, 4 address
        deltas), emptying the queue."""
        n = self.words[F_QCOUNT]
        if not n:
            return []
        self.words[F_QCOUNT] = 0
        return self.queue[:n].tolist()  # type: ignore[no-any-return]

    @staticmethod
    def masked(raw: bytes) -> bytes:
        """The descriptor with its address words zeroed (what native plans are keyed by)."""
        return raw[:8 * ADDR_FIRST] + bytes(8 * (ADDR_LAST + 1 - ADDR_FIRST)) + raw[8 * (ADDR_LAST + 1):]

    def seen_twice(self, raw: bytes, pe: int) -> bool:
        """Note a fully executed command; True from the second one (on any PE) that differs at most
        in its addresses (time to build a relocatable plan)."""
        key = self.masked(raw)
        if key in self.seen_masked:
            return (raw, pe) not in self.known
        if len(self.seen_masked) < self.max_plans:
            self.seen_masked.add(key)
        return False

    def register(self, raw: bytes, pe: int, redo: Any, template: Any) -> None:
        """Offer a plan to the native table after its doorbell was handled in Python (the hash the
        native code computed for that descriptor is still in the state)."""
        h = int(self.words[F_HASH])
        key = (raw, pe)
        if h < 0 or key in self.known:
            return
        masked = self.masked(raw)
        if len(self.templates) >= self.max_plans or self.per_key.get((masked, pe), 0) >= PLANS_PER_KEY:
            return
        ops = ops_of(redo)
        records = None if ops is None else [encode(op) for op in ops]
        if ops is None or records is None or len(records) > OPS_PER_PLAN or any(r is None for r in records):
            if len(self.known) >= 2 * self.max_plans:  # bounded: forget the refusals
                self.known = {k: v for k, v in self.known.items() if v >= 0}
            self.known[key] = -1
            return
        reloc = Relocation.build(raw, pe, ops, template, self.mem)
        key_pe = ANY_PE if reloc.any_pe else pe
        if self.per_key.get((masked, key_pe), 0) >= PLANS_PER_KEY:
            return
        plan = len(self.templates)
        self.keys[plan, :-1] = np.frombuffer(masked, dtype=np.int64)
        self.keys[plan, -1] = key_pe
        self.meta[plan] = reloc.meta
        self.relocs.append(reloc)
        self.shifted.append({})
        self.per_key[(masked, key_pe)] = self.per_key.get((masked, key_pe), 0) + 1
        self.ops[plan] = 0
        for k, rec in enumerate(records):
            assert rec is not None
            self.ops[plan, k, :len(rec)] = rec
        self.templates.append(template)
        self.events.append({})
        self._keep.append(ops)
        self.known[key] = plan
        mask = len(self.table) // 2 - 1
        slot = h & mask
        while self.table[2 * slot + 1]:
            slot = (slot + 1) & mask
        self.table[2 * slot] = h
        self.table[2 * slot + 1] = plan + 1

    def drain(self, events: list[Any], last_count: int, last_access: list[int],
              core_event: Callable[[int, list[int], list[int]], CoreEvent]) -> tuple[int, list[int], int]:
        """Append the queued rows' trace events to `events` as the Python path would have: the
        control-core segment before each command or fence (`core_event(n, totals, last totals)` when
        it made scalar accesses), then the command or fence. Returns the new (instruction count,
        access totals) of the last event and the number of commands."""
        rows = self.take()
        append = events.append
        shared, templates, core_events = self.events, self.templates, self._core_events
        fences = 0
        for plan, pc, count, a0, a1, a2, a3, mask, d0, d1, d2, d3 in rows:
            if count != last_count:
                now = [a0, a1, a2, a3]
                if now == last_access:
                    n = count - last_count
                    ev = core_events.get(n)
                    if ev is None:
                        if len(core_events) >= EVENT_CACHE:
                            core_events.clear()
                        ev = core_events[n] = CoreEvent(n)
                    append(ev)
                else:
                    append(core_event(count - last_count, now, last_access))
                    last_access = now
                last_count = count
            if plan == FENCE_ROW:
                append(FenceEvent(mask & 0xFFFF_FFFF_FFFF_FFFF, pc=pc))
                fences += 1
            elif d0 or d1 or d2 or d3:
                append(self.shifted_event(plan, pc, (d0, d1, d2, d3)))
            else:
                by_pc = shared[plan]
                cmd = by_pc.get(pc)
                if cmd is None:
                    cmd = by_pc[pc] = _NEW(CommandEvent)
                    cmd.__dict__.update(templates[plan].__dict__)
                    cmd.pc = pc
                append(cmd)
        self.handled += len(rows) - fences
        return last_count, last_access, len(rows) - fences

    def shifted_event(self, plan: int, pc: int, deltas: tuple[int, ...]) -> Any:
        """The event of `plan` moved by `deltas`, at `pc` (shared by repeats)."""
        cache = self.shifted[plan]
        key = (pc, *deltas)
        ev = cache.get(key)
        if ev is None:
            self._shifted_count += 1
            if self._shifted_count > EVENT_CACHE:  # bound the memory of all plans' caches together
                for c in self.shifted:
                    c.clear()
                self._shifted_count = 1
            ev = cache[key] = shifted_event(self.templates[plan], self.relocs[plan], pc, deltas)
        return ev

    def clear(self) -> None:
        """Forget every plan (the operand views they point into may be gone)."""
        self.table[:] = 0
        self.templates.clear()
        self.events.clear()
        self.shifted.clear()
        self._shifted_count = 0
        self.relocs.clear()
        self.per_key.clear()
        self.seen_masked.clear()
        self._keep.clear()
        self.known.clear()
        self.words[F_QCOUNT] = 0
