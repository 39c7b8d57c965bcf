"""Local-store allocation: placement of tensor buffers, with reuse when values die.

The code generator asks for a buffer when a tensor value is produced and releases it after the
value's last use (`lowering.passes.liveness`). Addresses are static (assigned at compile time);
the command processor orders reuse of an address behind earlier readers (write-after-read), so a
freed range reused at once makes the next command wait for the last readers of the old value (a
false dependency between units that would otherwise overlap). The default placement is next-fit:
the search for a free range starts where the last buffer ended and wraps around, so freed ranges
rest before they are reused; `next_fit=False` is first-fit from offset 0 (the compact placement
the code generator falls back to when the spread one does not fit; docs/DECISIONS.md D38).
When live tensors exceed the capacity, `LocalStoreOverflowError` names them, their sizes, the
capacity and the constexprs that set the block sizes. With dual_core the two cores of a PE share
its local store, so the allocator gets half of it (the code generator shifts core 1's addresses).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from lowering.errors import LocalStoreOverflowError
from mtia_sim.isa import ALIGNMENT


@dataclass(eq=False)
class Buffer:
    """A block of `size` bytes at `offset` in the local store, named after the value it holds."""

    offset: int
    size: int
    name: str
    refs: set[int] = field(default_factory=set)  # ids of live values viewing this buffer
    pinned: int = 0  # >0 while a loop holds it (loop-carried slots, multi-buffer rings)


def align(n: int) -> int:
    """`n` bytes rounded up to the local store's alignment."""
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class LocalStoreAllocator:
    """Next-fit (or first-fit) allocator over [0, capacity) with a free list; tracks the peak."""

    def __init__(
        self,
        capacity: int,
        kernel: str = "",
        constexprs: dict[str, int] | None = None,
        dual_core: bool = False,
        next_fit: bool = False,
    ) -> None:
        self.capacity = capacity
        self.next_fit = next_fit
        self.dual_core = dual_core  # capacity is one core's half of the PE's shared local store
        self.kernel = kernel
        self.constexprs = dict(constexprs or {})
        self.live: list[Buffer] = []
        self.cursor = 0  # next-fit: the search for a free range starts where the last buffer ended
        self.peak = 0
        self.log: list[tuple[str, int, int]] = []  # (name, offset, size) in allocation order

    def allocate(self, size: int, name: str) -> Buffer:
        size = align(max(size, 1))
        offset = self._fit(size, self.cursor) if self.next_fit else None
        if offset is None:
            offset = self._fit(size, 0)
        if offset is None:
            self._overflow(size, name)
            raise AssertionError("unreachable")
        self.cursor = offset + size
        buf = Buffer(offset, size, name)
        self.live.append(buf)
        self.peak = max(self.peak, offset + size)
        self.log.append((name, offset, size))
        return buf

    def _free_ranges(self) -> Iterator[tuple[int, int]]:
        """The free ranges of [0, capacity) in address order, as (offset, size)."""
        pos = 0
        for b in sorted(self.live, key=lambda b: b.offset):
            if b.offset > pos:
                yield pos, b.offset - pos
            pos = max(pos, b.offset + b.size)
        if pos < self.capacity:
            yield pos, self.capacity - pos

    def _fit(self, size: int, start: int) -> int | None:
        """The lowest offset >= `start` where `size` bytes are free, or None."""
        for offset, free in self._free_ranges():
            lo = max(offset, start)
            if offset + free - lo >= size:
                return lo
        return None

    def release(self, buf: Buffer) -> None:
        if buf in self.live and not buf.refs and buf.pinned <= 0:
            self.live.remove(buf)

    def _overflow(self, size: int, name: str) -> None:
        live = sorted(self.live, key=lambda b: -b.size)
        listing = ", ".join(f"{b.name} ({b.size} B)" for b in live[:8])
        if len(live) > 8:
            listing += f", ... ({len(live) - 8} more)"
        used = sum(b.size for b in self.live)
        shrink = [
            k for k, v in self.constexprs.items() if isinstance(v, int) and not isinstance(v, bool) and v > 1
        ]
        hint = (
            f"shrink the block sizes ({', '.join(shrink)})" if shrink else "shrink the kernel's block sizes"
        )
        hint += " or lower num_stages"
        if self.dual_core:
            hint += ", or turn dual_core off (it gives each core only half of the local store)"
        live_text = f"while {used} B are live [{listing}]" if live else "alone"
        if live and used + size <= self.capacity:
            largest = max(n for _, n in self._free_ranges())
            live_text += f" (the free space is fragmented: its largest range is {largest} B)"
        raise LocalStoreOverflowError(
            f"the kernel's blocks do not fit in the local store: {name} needs {size} B {live_text}; "
            f"capacity is {self.capacity} B"
            + (
                " (dual_core halves the local store: the two cores of a PE share it)"
                if self.dual_core
                else ""
            ),
            kernel=self.kernel or None,
            hint=hint,
        )
