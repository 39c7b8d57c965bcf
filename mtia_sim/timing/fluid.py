"""Shared bandwidth as a fluid: transfers in flight split each resource max-min fairly.

Each transfer has a volume and, per resource it crosses (DRAM, SRAM, a PE's local store, its NoC
path), the bytes it puts on that resource per volume byte. Whenever a transfer starts or ends, the
rates are recomputed by progressive filling (all rates rise together until a resource saturates;
the transfers on it freeze), so no resource is ever above its capacity and none is left idle while
a transfer through it could go faster. Resources used by one transfer only fold into that
transfer's own cap, so the filling iterates over the few truly shared resources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mtia_sim.timing.costs import Resource


@dataclass(eq=False, slots=True)
class Transfer:
    """One transfer in flight. `rate` is in volume bytes per cycle."""

    owner: Any
    remaining: float
    shares: list[tuple[Resource, float, float]]  # (resource, bytes per volume byte, capacity/cycle)
    last: float = 0.0
    rate: float = 0.0
    cap: float = math.inf  # its own limit from resources nobody else is using
    frozen: bool = False
    dram_w: float = 0.0  # DRAM / SRAM bytes per volume byte (for the bandwidth timeline)
    sram_w: float = 0.0

    def __post_init__(self) -> None:
        for res, w, _ in self.shares:
            if res == "dram":
                self.dram_w = w
            elif res == "sram":
                self.sram_w = w


class FluidBandwidth:
    """The set of transfers in flight and their fair-share rates."""

    def __init__(self) -> None:
        self.active: list[Transfer] = []
        self.users: dict[Resource, list[Transfer]] = {}
        self.clock = -1.0  # time of the last advance
        self.dram_rate = 0.0  # DRAM / SRAM bytes per cycle in flight after the last rebalance
        self.sram_rate = 0.0

    def advance(self, now: float) -> None:
        """Move every transfer's remaining volume forward to `now` at its current rate."""
        if now == self.clock:
            return
        self.clock = now
        for t in self.active:
            if now > t.last:
                t.remaining = max(0.0, t.remaining - t.rate * (now - t.last))
            t.last = now

    def add(self, t: Transfer, now: float) -> None:
        """Start a transfer (call `advance(now)` first, then `rebalance()` before time moves on)."""
        t.last = now
        self.active.append(t)
        for res, _, _ in t.shares:
            self.users.setdefault(res, []).append(t)

    def is_private(self, t: Transfer) -> bool:
        """True when no other transfer uses t's resources (and t is not on DRAM/SRAM, which the
        bandwidth timeline follows): then t's start or end changes nobody else's rate."""
        users = self.users
        return all(len(users[res]) == 1 and res != "dram" and res != "sram" for res, _, _ in t.shares)

    def next_finish(self) -> float | None:
        """Time until the earliest transfer in flight finishes at the current rates."""
        best = math.inf
        for t in self.active:
            if t.rate > 0 and t.remaining / t.rate < best:
                best = t.remaining / t.rate
        return best if best < math.inf else None

    def remove_all(self, done: list[Transfer]) -> None:
        """Drop finished transfers (call `advance` first)."""
        gone = {id(t) for t in done}
        self.active = [t for t in self.active if id(t) not in gone]
        for t in done:
            for res, _, _ in t.shares:
                lst = self.users[res]
                lst.remove(t)
                if not lst:
                    del self.users[res]

    def rebalance(self) -> float | None:
        """Recompute all rates, max-min fair; returns the time until the next transfer finishes."""
        users = self.users
        shared: dict[Resource, list[tuple[Transfer, float]]] = {}
        remaining: dict[Resource, float] = {}
        load: dict[Resource, float] = {}
        pending: list[Transfer] = []
        for t in self.active:
            cap = math.inf
            on_shared = False
            for res, w, c in t.shares:
                if len(users[res]) == 1:
                    if c < cap * w:
                        cap = c / w
                else:
                    on_shared = True
                    lst = shared.get(res)
                    if lst is None:
                        shared[res] = [(t, w)]
                        remaining[res] = c
                        load[res] = w
                    else:
                        lst.append((t, w))
                        load[res] += w
            t.cap = cap
            if on_shared:
                t.frozen = False
                pending.append(t)
            else:
                t.rate = cap
                t.frozen = True
        if pending:
            pending.sort(key=lambda t: t.cap)
            self._fill(shared, remaining, load, pending)
        best = math.inf
        dram = sram = 0.0
        for t in self.active:
            rate = t.rate
            if rate > 0:
                dram += rate * t.dram_w
                sram += rate * t.sram_w
                dt = t.remaining / rate
                if dt < best:
                    best = dt
        self.dram_rate, self.sram_rate = dram, sram
        return best if best < math.inf else None

    @staticmethod
    def _fill(shared: dict[Resource, list[tuple[Transfer, float]]], remaining: dict[Resource, float],
              load: dict[Resource, float], by_cap: list[Transfer]) -> None:
        """Progressive filling over shared resources, with each transfer's own cap."""
        count = {res: len(lst) for res, lst in shared.items()}
        left = len(by_cap)
        i = 0
        while left:
            best, level = None, math.inf
            for res, n in count.items():
                if n > 0:
                    lv = max(remaining[res], 0.0) / max(load[res], 1e-12)
                    if lv < level:
                        best, level = res, lv
            while i < len(by_cap) and by_cap[i].frozen:
                i += 1
            if i < len(by_cap) and by_cap[i].cap <= level:
                group = [by_cap[i]]
                level = by_cap[i].cap
            elif best is None:
                break
            else:
                group = [t for t, _ in shared[best] if not t.frozen]
            for t in group:
                t.rate = level
                t.frozen = True
                left -= 1
                for res, w, _ in t.shares:
                    if res in count:
                        remaining[res] -= level * w
                        load[res] -= w
                        count[res] -= 1
