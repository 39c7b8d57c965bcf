"""Simulated time memoised by the launch's trace: a launch whose programs did exactly what an earlier
launch's did is not replayed by the timing model again.

The timing model is a pure function of (machine, the programs' traces, sram_mode): it reads nothing
else and keeps no state between launches (mtia_sim.timing). A memo belongs to one simulator (one
machine), and its key is a SHA-256 of the other inputs, the traces serialised in full (pickle
without its memo, so equal content gives equal bytes whatever objects the functional model
shared; every field, every span's row addresses).
Nothing a kernel or a candidate controls enters the key except through the trace itself, so a hit
returns the answer the timing model would have computed. Two launches that differ in any event
(an address, a byte count, an instruction count) miss.

Digesting costs ~10 us per event: cheaper than the Python replay but not always than the native
one, so a launch is digested only when an earlier launch of the same kernel, grid and sram_mode
took longer to time than its digest is expected to take; that earlier launch (kept with its
result) is digested then too, so the second identical launch already hits (`SessionStats` says
what happened).
"""

from __future__ import annotations

import hashlib
import io
import pickle
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

MEMO_ENTRIES = 8  # timing results kept per simulator (a result holds its command records)
PENDING_ENTRIES = 4  # first sightings kept undigested until their launch is seen again
DIGEST_S_PER_EVENT = 12e-6  # first guess of the digest's cost; learnt from the digests made
WORTH = 2.0  # digest when the last timing of that launch took WORTH x the expected digest time


@dataclass
class SessionStats:
    """What a simulator's launches cost on the host (wall seconds of the evaluator's thread)."""

    launches: int = 0
    functional_s: float = 0.0  # the functional model (programs run on the cores and units)
    timing_s: float = 0.0  # the timing model's replays that ran
    digest_s: float = 0.0  # digests of traces for the memo
    memo_hits: int = 0  # launches whose timing came from the memo
    memo_misses: int = 0  # digested launches the memo did not know

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def minus(self, earlier: SessionStats) -> SessionStats:
        """The stats accumulated since `earlier` (a copy taken then)."""
        a, b = asdict(self), asdict(earlier)
        return SessionStats(**{k: a[k] - b[k] for k in a})

    def copy(self) -> SessionStats:
        return SessionStats(**asdict(self))


def trace_digest(traces: list[Any], sram_mode: str) -> str:
    """SHA-256 of the timing model's input but the machine (a memo lives in one simulator, whose
    machine is fixed): sram_mode and every trace in full."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True  # no memo: shared and equal-but-distinct objects serialise the same
    pickler.dump((sram_mode, traces))
    return hashlib.sha256(buf.getbuffer()).hexdigest()


def _events(traces: list[Any]) -> int:
    return sum(len(t.events) for t in traces)


_classes: dict[type, type] = {}


def memo_simulator(machine: str) -> Any:
    """A `mtia_sim.Simulator` for `machine` whose timing step is memoised (see the module doc)."""
    from mtia_sim.simulator import Simulator

    cls = _classes.get(Simulator)
    if cls is None:
        methods = {"_time": _memo_time, "_remember": _remember}
        cls = _classes[Simulator] = type("MemoSimulator", (Simulator,), methods)
    sim = cls(machine=machine)
    sim._base_time = Simulator._time
    sim.memo_stats = SessionStats()
    sim._memo = OrderedDict()
    sim._memo_cost = {}  # (image id, grid, sram_mode) -> seconds its last timing took
    sim._undigested = OrderedDict()  # launch key -> (traces, result) of its first sighting
    sim._digest_rate = DIGEST_S_PER_EVENT
    return sim


def _memo_time(self: Any, traces: list[Any], sram_mode: str = "cache") -> Any:
    """`Simulator._time` with the memo in front (bound as a method of the memo simulator)."""
    stats: SessionStats = self.memo_stats
    stats.launches += 1
    launch_key = (id(self._image), tuple(t.program_id for t in traces[-1:]), len(traces), sram_mode)
    events = _events(traces)
    last = self._memo_cost.get(launch_key)
    digest = None
    if last is not None and last > WORTH * self._digest_rate * events:
        pending = self._undigested.pop(launch_key, None)
        if pending is not None:  # the launch first seen: digested now that it proved worth it
            self._remember(_digest(self, pending[0], sram_mode), pending[1])
        digest = _digest(self, traces, sram_mode)
        hit = self._memo.get(digest)
        if hit is not None:
            self._memo.move_to_end(digest)
            stats.memo_hits += 1
            return hit
        stats.memo_misses += 1
    t0 = time.perf_counter()
    result = self._base_time(self, traces, sram_mode)
    spent = time.perf_counter() - t0
    stats.timing_s += spent
    self._memo_cost[launch_key] = spent
    if result is not None and digest is not None:
        self._remember(digest, result)
    elif result is not None and last is None:  # kept (not digested) until this launch is seen again
        self._undigested[launch_key] = (traces, result)
        while len(self._undigested) > PENDING_ENTRIES:
            self._undigested.popitem(last=False)
    return result


def _digest(self: Any, traces: list[Any], sram_mode: str) -> str:
    t0 = time.perf_counter()
    digest = trace_digest(traces, sram_mode)
    spent = time.perf_counter() - t0
    self.memo_stats.digest_s += spent
    self._digest_rate = spent / max(_events(traces), 1)
    return digest


def _remember(self: Any, digest: str, result: Any) -> None:
    self._memo[digest] = result
    self._memo.move_to_end(digest)
    while len(self._memo) > MEMO_ENTRIES:
        self._memo.popitem(last=False)
