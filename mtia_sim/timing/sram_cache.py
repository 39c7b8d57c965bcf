"""The on-chip SRAM as a memory-side cache in front of DRAM (docs/DECISIONS.md D5).

Kernels address DRAM; the SRAM sits between the fabric and the LPDDR controllers and keeps the lines
that PEs touched, so re-reads (a GEMM's operand panels, a softmax's second pass) are served at SRAM
bandwidth and latency. The model is a line-granular LRU cache over device addresses:

- `mode="cache"` (default): cold at the start of each launch (inputs were just written by the host);
  a DRAM read of a resident line is a hit (SRAM bytes), of any other line a miss (DRAM bytes, and the
  line is filled into the SRAM when the command completes). A miss moves the whole line from DRAM,
  so a command pays at least its missed lines' bytes (a read covering part of a line pays the
  line). A miss on a line whose fill is already in flight merges with it (as a cache's miss-status
  registers do): SRAM bytes, but the command cannot complete before that fill. Writes are
  write-through with allocate: they cost DRAM bandwidth and leave the line resident, so a later read
  hits.
- `mode="resident"`: the launch's tensors were placed in the SRAM scratchpad before it started (the
  ISCA'25 GEMM figure, "operands resident on chip"): every DRAM access is served by the SRAM while the
  launch's footprint fits `capacity`; beyond that, accesses to lines that no longer fit go to DRAM.
  The placement is not free: the lines placed by reads were copied in from DRAM before the launch and
  those placed by writes are written back after it (`CacheStats.placement_bytes`); `simulate` charges
  them at DRAM bandwidth as part of the launch (`launch_cycles`), so a kernel never gets its operands
  on chip for nothing (the kernel's own cycles, as the published figure, exclude it).
- `mode="off"`: the SRAM is not used as a cache (every DRAM access goes to DRAM).

`capacity` defaults to the whole SRAM (`sram_bytes`); a smaller value models an SRAM partitioned
into a scratchpad (explicit `level="sram"` allocations) and a cache. Eviction is LRU, batched: when
the resident lines exceed the capacity, the least recently used ~1/8 of the capacity is dropped at
once (so eviction costs O(resident lines) per capacity/8 lines filled).

Commands without address spans (hand-built traces) and scalar core accesses bypass the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mtia_sim import isa
from mtia_sim.events import CommandEvent, MemLevel, MemSpan

SRAM_MODES = ("cache", "resident", "off")
_EVICT_SLACK = 8  # evict down to capacity - capacity/8


@dataclass
class CacheStats:
    """What the cache did during one launch (bytes are the commands' DRAM bytes, split)."""

    mode: str
    capacity_bytes: int
    line_bytes: int
    read_hit_bytes: float = 0.0
    read_miss_bytes: float = 0.0
    write_bytes: float = 0.0
    hit_lines: int = 0
    miss_lines: int = 0
    evicted_lines: int = 0
    placed_read_lines: int = 0  # resident mode: lines placed in the SRAM by a read (copied in from DRAM)
    placed_write_lines: int = 0  # resident mode: lines placed by a write (written back to DRAM after)

    @property
    def placement_bytes(self) -> float:
        """Resident mode: bytes the placement moves between DRAM and SRAM around the launch (inputs
        copied in before it, outputs written back after it); 0 in the other modes."""
        return float((self.placed_read_lines + self.placed_write_lines) * self.line_bytes)

    @property
    def hit_rate(self) -> float | None:
        total = self.read_hit_bytes + self.read_miss_bytes
        return self.read_hit_bytes / total if total > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "capacity_bytes": self.capacity_bytes, "line_bytes": self.line_bytes,
                "read_hit_bytes": self.read_hit_bytes, "read_miss_bytes": self.read_miss_bytes,
                "write_bytes": self.write_bytes, "hit_lines": self.hit_lines, "miss_lines": self.miss_lines,
                "evicted_lines": self.evicted_lines, "hit_rate": self.hit_rate,
                "placed_read_lines": self.placed_read_lines, "placed_write_lines": self.placed_write_lines,
                "placement_bytes": self.placement_bytes}


@dataclass
class Routed:
    """A command's bytes per level after the cache: what each memory actually serves."""

    read: dict[MemLevel, float]
    written: dict[MemLevel, float]
    sram_fill: float = 0.0  # bytes written into the SRAM by misses and write-allocates (SRAM traffic)
    fill_lines: list[slice | np.ndarray] | None = None  # lines that become resident when the command ends
    fill_id: int = 0
    waits: set[int] = field(default_factory=set)  # fills in flight this command's merged misses wait for


def span_lines(spans: list[MemSpan], line_bytes: int) -> np.ndarray:
    """Sorted unique cache-line numbers (device address // line_bytes) covered by `spans`."""
    parts = [_rows_lines(sp, line_bytes) for sp in spans]
    parts = [p for p in parts if p[0].size]
    if not parts:
        return np.empty(0, dtype=np.int64)
    if len(parts) == 1:
        lines, ordered = parts[0]
        if ordered or lines.size < 2 or bool(np.all(lines[1:] > lines[:-1])):
            return lines  # already sorted and unique (the usual strided pattern)
        return np.unique(lines)
    return np.unique(np.concatenate([p[0] for p in parts]))


def _rows_lines(sp: MemSpan, line_bytes: int) -> tuple[np.ndarray, bool]:
    """The lines each row covers, and whether they are known sorted and unique."""
    if sp.starts is None and len(sp.counts) == 1 and sp.base % line_bytes == 0 \
            and sp.strides[0] % line_bytes == 0:  # rows on line boundaries, one stride: no searching
        per = -(-sp.row_bytes // line_bytes)
        step = sp.strides[0] // line_bytes
        rows = sp.base // line_bytes + np.arange(sp.counts[0], dtype=np.int64) * step
        if per == 1:
            return rows, step >= 1
        return (rows[:, None] + np.arange(per, dtype=np.int64)).reshape(-1), step >= per
    starts = sp.row_starts()
    if starts.size == 0:
        return starts, True
    first = starts // line_bytes
    last = (starts + (sp.row_bytes - 1)) // line_bytes
    n = last - first + 1
    if int(n.max()) == 1:
        return first, False
    offsets = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return np.repeat(first, n) + offsets, False


class SramCache:
    """Line-granular LRU state of the SRAM cache during one replay."""

    def __init__(self, mode: str, capacity_bytes: int, line_bytes: int) -> None:
        if mode not in SRAM_MODES:
            raise ValueError(f"sram_mode must be one of {SRAM_MODES}, got {mode!r}")
        if capacity_bytes < 0 or line_bytes <= 0:
            raise ValueError(f"SRAM cache needs capacity >= 0 and line > 0 bytes, got {capacity_bytes}, "
                             f"{line_bytes}")
        self.mode = mode
        self.line = line_bytes
        self.capacity = capacity_bytes // line_bytes
        self.stats = CacheStats(mode, capacity_bytes, line_bytes)
        self._stamps = np.zeros(0, dtype=np.int32)  # per DRAM line: last use (> 0), -fill id, 0 absent
        self._clock = 0
        self._resident = 0

    def route(self, ev: CommandEvent, fill_id: int) -> Routed | None:
        """Split a command's DRAM bytes into SRAM hits and DRAM misses; None when nothing changes.

        `fill_id` (> 0, unique per command) names the lines this command misses on while its fill
        is in flight; `Routed.waits` lists the fills in flight that this command merged with.
        """
        dram_r = ev.bytes_read.get(MemLevel.DRAM, 0)
        dram_w = ev.bytes_written.get(MemLevel.DRAM, 0)
        if self.mode == "off" or not (dram_r or dram_w) or not ev.spans:
            return None
        read = {k: float(v) for k, v in ev.bytes_read.items()}
        written = {k: float(v) for k, v in ev.bytes_written.items()}
        routed = Routed(read, written)
        st = self.stats
        if dram_r:
            spans = [s for s in ev.spans if not s.write and s.level == MemLevel.DRAM]
            missed_before = st.miss_lines
            hit_b = dram_r * self._access(spans, fill_id, routed, write=False)
            # a missed line is filled whole, so DRAM moves at least its bytes: a read that covers
            # part of a line pays the line, and the neighbour that hits on the rest got it paid for
            # (charging only the command's share let misaligned rows read half their bytes free)
            miss_b = max(dram_r - hit_b, float((st.miss_lines - missed_before) * self.line))
            read[MemLevel.DRAM] = miss_b
            read[MemLevel.SRAM] = read.get(MemLevel.SRAM, 0.0) + hit_b
            st.read_hit_bytes += hit_b
            st.read_miss_bytes += miss_b
            routed.sram_fill += miss_b
        if dram_w:
            spans = [s for s in ev.spans if s.write and s.level == MemLevel.DRAM]
            kept = dram_w * self._access(spans, fill_id, routed, write=True)
            st.write_bytes += dram_w
            if self.mode == "resident":  # the tensor lives in the SRAM: no DRAM write while it fits
                written[MemLevel.DRAM] = dram_w - kept
                written[MemLevel.SRAM] = written.get(MemLevel.SRAM, 0.0) + kept
            else:  # write-through with allocate
                routed.sram_fill += dram_w
        routed.read = {k: v for k, v in read.items() if v}
        routed.written = {k: v for k, v in written.items() if v}
        routed.waits.discard(fill_id)
        return routed

    # ---- line state: stamp > 0 resident (last use), < 0 fill in flight (-fill id), 0 absent ------
    def fill(self, routed: Routed) -> None:
        """The command that missed completed: its lines are now resident (most recently used)."""
        self._clock += 1
        for piece in routed.fill_lines or ():
            view = self._stamps[piece]
            mine = view == -routed.fill_id
            if isinstance(piece, slice):
                self._stamps[piece][mine] = self._clock
            else:
                self._stamps[piece[mine]] = self._clock
        routed.fill_lines = None

    def _piece(self, spans: list[MemSpan]) -> slice | np.ndarray | None:
        """The lines of `spans` (relative to DRAM's first line) as a slice when contiguous, else as
        a sorted index array; grows the stamp array to cover them."""
        base = isa.DRAM_BASE // self.line
        piece: slice | np.ndarray
        if len(spans) == 1 and spans[0].starts is None and not spans[0].counts:
            sp = spans[0]
            lo = sp.base // self.line - base
            hi = (sp.base + sp.row_bytes - 1) // self.line - base + 1
            if hi <= lo or lo < 0:
                return None
            piece, top = slice(lo, hi), hi
        else:
            lines = span_lines(spans, self.line) - base
            if lines.size == 0 or lines[0] < 0:
                return None
            piece, top = lines, int(lines[-1]) + 1
        if top > self._stamps.size:
            grown = np.zeros(max(top, 2 * self._stamps.size), dtype=np.int32)
            grown[:self._stamps.size] = self._stamps
            self._stamps = grown
        return piece

    def _access(self, spans: list[MemSpan], fill_id: int, routed: Routed, *, write: bool) -> float:
        """Look the spans' lines up; returns the fraction served by the SRAM (hits, and misses merged
        with a fill in flight, which `routed.waits` records). Hits become most recently used; missed
        lines are claimed for this command's fill (resident mode: placed at once while they fit)."""
        if not spans:
            return 0.0
        piece = self._piece(spans)
        if piece is None:
            return 0.0
        self._clock += 1
        arr = self._stamps
        stamps = arr[piece]
        total = stamps.size
        present = stamps > 0
        pending = stamps < 0
        absent = ~(present | pending)
        n_new = int(np.count_nonzero(absent))
        if pending.any():
            routed.waits.update((-np.unique(stamps[pending])).tolist())
        placed = self.mode == "resident" and self._resident + n_new <= self.capacity
        value = self._clock if placed else -fill_id
        if placed:  # resident mode: read lines were copied in, written ones are written back
            if write:
                self.stats.placed_write_lines += n_new
            else:
                self.stats.placed_read_lines += n_new
        if isinstance(piece, slice):  # stamps is a view: write through it
            stamps[present] = self._clock
            stamps[absent] = value
        else:
            arr[piece[present]] = self._clock
            arr[piece[absent]] = value
        self._resident += n_new
        missed = n_new if value < 0 else 0
        if missed:
            routed.fill_id = fill_id
            routed.fill_lines = (routed.fill_lines or []) + [piece]
        st = self.stats
        st.hit_lines += total - missed
        st.miss_lines += missed
        if self._resident > self.capacity:
            self._evict()
        return (total - missed) / total

    def _evict(self) -> None:
        """Drop the least recently used lines until 7/8 of the capacity is in use."""
        keep = self.capacity - self.capacity // _EVICT_SLACK  # lines in flight are never evicted
        arr = self._stamps
        stamps = arr[arr > 0]
        drop = stamps.size - keep
        if drop <= 0:
            return
        threshold = np.partition(stamps, drop - 1)[drop - 1] if keep > 0 else stamps.max()
        old = (arr > 0) & (arr <= threshold)
        evicted = int(np.count_nonzero(old))
        arr[old] = 0
        self._resident -= evicted
        self.stats.evicted_lines += evicted
