"""Simulated time memoised by the launch's trace: a launch whose programs did exactly what an earlier
launch's did is not replayed by the timing model again.

The timing model is a pure function of (machine, the programs' traces, sram_mode): it reads nothing
else and keeps no state between launches (mtia_sim.timing). `TimingMemo` is a timing step the
simulator is built with (`Simulator(machine, timing=TimingMemo())`). A memo serves one machine, and
its key is a SHA-256 of the other inputs, the traces serialised in full (pickle
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
from typing import TYPE_CHECKING, Any

from mtia_sim.simulator import Simulator, TimingStep, replay_timing

if TYPE_CHECKING:
    from mtia_sim.events import ProgramTrace
    from mtia_sim.loader import Image
    from mtia_sim.machine import MachineDescription
    from mtia_sim.timing.result import TimingResult

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


LaunchKey = tuple[int, tuple[tuple[int, int, int], ...], int, str]


class TimingMemo:
    """A `TimingStep` with a memo in front of `base` (default: the timing model); see the module doc.

    It serves one machine (the first it times; another raises ValueError). `stats` says what the
    launches it timed cost.
    """

    def __init__(self, base: TimingStep = replay_timing) -> None:
        self.base = base
        self.stats = SessionStats()
        self._machine: MachineDescription | None = None
        self._memo: OrderedDict[str, TimingResult] = OrderedDict()
        self._cost: dict[LaunchKey, float] = {}  # launch key -> seconds its last timing took
        self._undigested: OrderedDict[LaunchKey, tuple[list[ProgramTrace], TimingResult]] = OrderedDict()
        self._digest_rate = DIGEST_S_PER_EVENT

    def __call__(self, machine: MachineDescription, traces: list[ProgramTrace], sram_mode: str,
                 image: Image) -> TimingResult | None:
        if self._machine is None:
            self._machine = machine
        elif machine is not self._machine and machine != self._machine:
            raise ValueError(f"a TimingMemo serves one machine ({self._machine.name}), not {machine.name}")
        stats = self.stats
        stats.launches += 1
        launch_key = (id(image), tuple(t.program_id for t in traces[-1:]), len(traces), sram_mode)
        events = _events(traces)
        last = self._cost.get(launch_key)
        digest = None
        if last is not None and last > WORTH * self._digest_rate * events:
            pending = self._undigested.pop(launch_key, None)
            if pending is not None:  # the launch first seen: digested now that it proved worth it
                self._remember(self._digest(pending[0], sram_mode), pending[1])
            digest = self._digest(traces, sram_mode)
            hit = self._memo.get(digest)
            if hit is not None:
                self._memo.move_to_end(digest)
                stats.memo_hits += 1
                return hit
            stats.memo_misses += 1
        t0 = time.perf_counter()
        result = self.base(machine, traces, sram_mode, image)
        spent = time.perf_counter() - t0
        stats.timing_s += spent
        self._cost[launch_key] = spent
        if result is not None and digest is not None:
            self._remember(digest, result)
        elif result is not None and last is None:  # kept (not digested) until this launch is seen again
            self._undigested[launch_key] = (traces, result)
            while len(self._undigested) > PENDING_ENTRIES:
                self._undigested.popitem(last=False)
        return result

    def _digest(self, traces: list[ProgramTrace], sram_mode: str) -> str:
        t0 = time.perf_counter()
        digest = trace_digest(traces, sram_mode)
        spent = time.perf_counter() - t0
        self.stats.digest_s += spent
        self._digest_rate = spent / max(_events(traces), 1)
        return digest

    def _remember(self, digest: str, result: TimingResult) -> None:
        self._memo[digest] = result
        self._memo.move_to_end(digest)
        while len(self._memo) > MEMO_ENTRIES:
            self._memo.popitem(last=False)


def memo_simulator(machine: str) -> tuple[Simulator, TimingMemo]:
    """A `mtia_sim.Simulator` for `machine` whose timing step is a `TimingMemo`, and that memo."""
    memo = TimingMemo()
    return Simulator(machine, timing=memo), memo
