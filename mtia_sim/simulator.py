"""Public API of the simulator: memory management, image loading and kernel launches.

    sim = Simulator("mtia-2i")
    x = sim.to_device(np.arange(1024, dtype=np.float32))
    image = sim.load_image(elf_bytes, entry="kernel")
    result = sim.launch(image, grid=(4, 1, 1), args=[x, 1024])
    result.cycles, result.counters, sim.from_device(x, (1024,), np.float32)

Zero-copy tensors: `addr = sim.map_host(array_or_bytearray)` (or `sim.map_host(address, nbytes, keep=owner)`)
makes host memory DRAM at `addr` without copying; kernels read and write it in place, and
`sim.unmap_host(addr)` ends the mapping (before the host frees that memory). Mapped buffers live
above the DRAM arena, within the machine's DRAM size, and count as DRAM everywhere (timing, counters,
scalar accesses).

Programs (grid points, x fastest) run one after another on one Unicorn engine, PE by PE; program i goes to
slot i mod (PEs x cores), PE-major (PE = slot mod num_pes, core = slot // num_pes). The timing
model then replays all program traces together.
"""

from __future__ import annotations

import contextlib
import gc
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mtia_sim import isa
from mtia_sim.core import Core, ProgramSpec
from mtia_sim.errors import Location, SimulationError
from mtia_sim.events import CommandEvent, ProgramTrace
from mtia_sim.isa import CommandDescriptor
from mtia_sim.loader import Image, link
from mtia_sim.memory import MemorySystem
from mtia_sim.units import execute

if TYPE_CHECKING:
    from mtia_sim.machine import MachineDescription
    from mtia_sim.timing.result import TimingResult

INT_TYPES = {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "ptr", "int"}
FLOAT_TYPES = {"f16", "bf16", "f32", "f64", "fp16", "fp32", "fp64", "float"}


class TimingStep(Protocol):
    """The timing step of a launch (`Simulator(timing=...)`): the programs' traces to a TimingResult
    (None: no timing model). `image` is the launched image, for a step that keys on the kernel (a
    memo); the traces are the whole input of the timing model with `machine` and `sram_mode`."""

    def __call__(self, machine: MachineDescription, traces: list[ProgramTrace], sram_mode: str,
                 image: Image) -> TimingResult | None: ...


def replay_timing(machine: MachineDescription, traces: list[ProgramTrace], sram_mode: str,
                  image: Image | None = None) -> TimingResult | None:
    """The default timing step: replay the traces on the timing model (`mtia_sim.timing.simulate`)."""
    try:
        from mtia_sim.timing import simulate
    except ImportError:
        return None
    return simulate(machine, traces, sram_mode=sram_mode)


@dataclass
class LaunchResult:
    """What one launch did: functional counts, the per-program traces and the timing model's verdict."""

    programs: int
    instructions: int
    commands: int
    traces: list[ProgramTrace]
    timing: Any  # mtia_sim.timing.TimingResult (None if the timing model is unavailable)
    debug_log: list[tuple[tuple[int, int, int], int]] = field(default_factory=list)  # grid order

    def _need_timing(self) -> Any:
        if self.timing is None:
            raise RuntimeError("the timing model (mtia_sim.timing) is not available")
        return self.timing

    @property
    def cycles(self) -> float:
        return float(self._need_timing().cycles)

    @property
    def seconds(self) -> float:
        return float(self._need_timing().seconds)

    @property
    def counters(self) -> Any:
        return self._need_timing().counters


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a launch.

    A launch allocates hundreds of thousands of small, acyclic, long-lived objects (events, spans,
    timing records); each full collection rescans all of them, and of every trace still held by the
    caller, which cost ~35% of a 256 MiB stream launch. Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def encode_arg(value: int | float, arg_type: str | None = None) -> int:
    """One 64-bit argument slot per the kernel ABI: ints sign-extended, floats as float64 bits."""
    if arg_type is not None:
        t = arg_type.lower().lstrip("*")
        if arg_type.startswith("*") or t in INT_TYPES:
            if isinstance(value, float) and not float(value).is_integer():
                raise TypeError(f"argument of type {arg_type} needs an integer, got {value!r}")
            return int(value) & 0xFFFF_FFFF_FFFF_FFFF
        if t in FLOAT_TYPES:
            return int(struct.unpack("<Q", struct.pack("<d", float(value)))[0])
        raise ValueError(f"unknown argument type {arg_type!r}; use one of {sorted(INT_TYPES | FLOAT_TYPES)}")
    if isinstance(value, bool | int | np.integer):
        return int(value) & 0xFFFF_FFFF_FFFF_FFFF
    if isinstance(value, float | np.floating):
        return int(struct.unpack("<Q", struct.pack("<d", float(value)))[0])
    raise TypeError(f"kernel arguments must be int or float, got {type(value).__name__}")


class Simulator:
    """The simulated chip: memories, one control-core engine, the functional units and the timing model.

    `max_instructions` and `max_commands` are budgets per program (grid point): a program that
    exceeds one raises RunawayError (default budgets: KEGEN_SIM_MAX_INSTRUCTIONS or 2e8 instructions).
    DRAM is an arena of `dram_arena_bytes` (default KEGEN_SIM_DRAM_ARENA_BYTES or 1 GiB; at most the machine's
    DRAM; its pages take host memory only once touched) plus any host memory mapped with `map_host`;
    SRAM and the local stores are sized by the machine description. Memory contents (including
    local stores) persist across launches until overwritten.

    `timing` is the launch's timing step (`TimingStep`; default `replay_timing`, the timing model):
    a caller wraps it to memoise or observe timing without subclassing (lowering.backend.timing_memo).

    Stable API (also used by the evaluator's device process): alloc/free/write/read/to_device/
    from_device, map_host/unmap_host (zero copy), load_image, launch -> LaunchResult.
    """

    def __init__(self, machine: MachineDescription | str = "mtia-2i", *, dram_arena_bytes: int | None = None,
                 max_instructions: int | None = None, max_commands: int = 10_000_000,
                 timing: TimingStep | None = None) -> None:
        # defaults: KEGEN_SIM_DRAM_ARENA_BYTES (1 GiB), KEGEN_SIM_MAX_INSTRUCTIONS (2e8); see kegen.settings
        if dram_arena_bytes is None:
            dram_arena_bytes = _env_int("KEGEN_SIM_DRAM_ARENA_BYTES", 1 << 30)
        if max_instructions is None:
            max_instructions = _env_int("KEGEN_SIM_MAX_INSTRUCTIONS", 200_000_000)
        if isinstance(machine, str):
            from mtia_sim.machine import load_machine

            machine = load_machine(machine)
        self.machine = machine
        self.num_pes = int(machine.num_pes)
        self.cores_per_pe = int(machine.cores_per_pe)
        dram = min(dram_arena_bytes, int(getattr(machine, "dram_bytes", dram_arena_bytes)))
        sram = min(int(machine.sram_bytes), isa.DRAM_BASE - isa.SRAM_BASE)
        window = int(getattr(machine, "dram_bytes", dram))
        self.memory = MemorySystem(num_pes=self.num_pes, local_store_bytes=int(machine.local_store_bytes),
                                   sram_bytes=sram, dram_bytes=dram, dram_window_bytes=window)
        self.core = Core(self.memory, max_instructions=max_instructions, max_commands=max_commands)
        if timing is not None and not callable(timing):
            raise TypeError(f"timing must be a callable TimingStep, got {type(timing).__name__}")
        self.timing: TimingStep = replay_timing if timing is None else timing
        self._image: Image | None = None

    # -- memory -----------------------------------------------------------------------------------
    def alloc(self, nbytes: int, *, level: str = "dram", align: int = 64) -> int:
        """Allocate device memory in 'dram' or 'sram'; returns its device address."""
        return self.memory.allocator(level).alloc(nbytes, max(align, 1))

    def free(self, addr: int) -> None:
        """Free a block from `alloc`/`to_device` (host mappings end with `unmap_host`)."""
        if any(m.device == addr for m in self.memory.host_maps):
            raise ValueError(f"{addr:#x} is a mapped host buffer: end it with unmap_host, not free")
        level = "sram" if isa.SRAM_BASE <= addr < isa.DRAM_BASE else "dram"
        self.memory.allocator(level).free(addr)

    def reset_memory(self) -> None:
        """Free every DRAM and SRAM allocation (contents are kept until overwritten)."""
        self.memory.dram_alloc.reset()
        self.memory.sram_alloc.reset()

    def map_host(self, buffer: np.ndarray | bytearray | memoryview | int, nbytes: int | None = None, *,
                 keep: Any = None) -> int:
        """Map host memory into device DRAM without copying; returns its device address.

        `buffer` is a C-contiguous writable numpy array or any writable buffer (a bytearray received
        from a socket, a memoryview): kernels then read and write its bytes in place. Or it is a raw
        host address with `nbytes`, whose memory the caller keeps alive until `unmap_host` (`keep`,
        e.g. the tensor owning it, is held until then). The control core maps whole host pages, so
        its scalar accesses just outside the buffer, within the first and last page, reach the
        neighbouring host bytes; unit commands are bounded by the buffer itself.
        """
        if isinstance(buffer, bytearray | memoryview):
            if isinstance(buffer, memoryview) and buffer.readonly:
                raise ValueError("map_host needs a writable buffer (kernels write device memory in place)")
            keep = buffer if keep is None else keep
            buffer = np.frombuffer(buffer, dtype=np.uint8)
        if isinstance(buffer, np.ndarray):
            if not buffer.flags.c_contiguous or not buffer.flags.writeable:
                raise ValueError("map_host needs a C-contiguous, writable array (np.ascontiguousarray it)")
            host, size, keep = int(buffer.ctypes.data), int(buffer.nbytes), buffer if keep is None else keep
        else:
            if nbytes is None:
                raise TypeError("map_host(address, nbytes): give the size of the host memory")
            host, size = int(buffer), int(nbytes)
        m = self.memory.map_host(host, size, keep)
        try:
            self.core.map_host(m.page_device, m.page_bytes, m.page_host)
        except Exception:
            self.memory.unmap_host(m.device)
            raise
        return m.device

    def unmap_host(self, addr: int) -> None:
        """End a `map_host` mapping (the device address it returned); the host memory is untouched."""
        m = self.memory.unmap_host(addr)
        self.core.unmap_host(m.page_device, m.page_bytes)

    def write(self, addr: int, data: bytes | np.ndarray) -> None:
        self.memory.write(addr, data)

    def read(self, addr: int, nbytes: int) -> bytes:
        return self.memory.read(addr, nbytes)

    def to_device(self, array: np.ndarray, *, level: str = "dram") -> int:
        """Allocate and copy `array` (C order) to the device; returns its address."""
        arr = np.ascontiguousarray(array)
        addr = self.alloc(max(arr.nbytes, 1), level=level)
        self.memory.write(addr, arr)
        return addr

    def from_device(self, addr: int, shape: int | Sequence[int], dtype: Any) -> np.ndarray:
        """A copy of device memory at `addr` as an array of `shape` and `dtype` (C order)."""
        dt = np.dtype(dtype)
        shp = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(np.prod(shp, dtype=np.int64)) * dt.itemsize
        return self.memory.view(addr, n).copy().view(dt).reshape(shp)

    # -- code -------------------------------------------------------------------------------------
    def load_image(self, elf: bytes | Sequence[bytes], *, entry: str) -> Image:
        """Link a relocatable RISC-V object (or objects, or load an executable) and load it."""
        objects = [bytes(elf)] if isinstance(elf, bytes | bytearray) else [bytes(o) for o in elf]
        image = link(objects, entry)
        self._install(image)
        return image

    def _install(self, image: Image) -> None:
        if self._image is not image:
            self.core.load(image)
            self._image = image

    def execute(self, desc: CommandDescriptor, *, pe: int = 0) -> CommandEvent:
        """Run one command directly (no core) as PE `pe` would; LOCAL_BASE means that PE's store."""
        if not 0 <= pe < self.num_pes:
            raise ValueError(f"pe must be in [0, {self.num_pes}), got {pe}")
        try:
            with np.errstate(all="ignore"):
                return execute(desc, self.memory, pe)
        except SimulationError as exc:
            raise exc.locate(Location(pe=pe, command=f"{desc.op.name} tag={desc.tag}")) from None

    def local_address(self, pe: int, offset: int = 0) -> int:
        """Host-visible address of byte `offset` of PE `pe`'s local store (its PE window)."""
        return isa.PE_WINDOW_BASE + pe * isa.PE_WINDOW_STRIDE + offset

    # -- launch -----------------------------------------------------------------------------------
    def launch(self, image: Image, grid: Sequence[int], args: Sequence[int | float], *,
               arg_types: Sequence[str] | None = None, dual_core: bool = False,
               trace: bool = False, sram_mode: str = "cache") -> LaunchResult:
        """Run every program of `grid` (1 to 3 dims) and replay them on the timing model.

        `trace` is accepted for API stability; traces are always kept in the result. `sram_mode`
        is how the SRAM serves DRAM tensors in the timing model ("cache", "resident", "off";
        mtia_sim.timing.sram_cache); it never changes results.
        """
        g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
        if len(g) != 3 or any(x < 1 for x in g):
            raise ValueError(f"grid must be 1 to 3 positive sizes, got {tuple(grid)}")
        if arg_types is not None and len(arg_types) != len(args):
            raise ValueError(f"{len(args)} arguments but {len(arg_types)} argument types")
        slots = [encode_arg(a, None if arg_types is None else arg_types[i]) for i, a in enumerate(args)]
        self._install(image)
        cores = self.cores_per_pe if dual_core else 1
        nslots = self.num_pes * cores
        specs: list[ProgramSpec] = []
        for z in range(g[2]):
            for y in range(g[1]):
                for x in range(g[0]):
                    slot = len(specs) % nslots
                    specs.append(ProgramSpec((x, y, z), g, slot % self.num_pes, slot // self.num_pes, slots))
        # Run PE by PE (each PE's programs in grid order) so the local-store window is remapped at
        # most once per PE; programs of different PEs are independent, the timing model overlaps them.
        order = sorted(range(len(specs)), key=lambda i: specs[i].pe)
        found: list[ProgramTrace | None] = [None] * len(specs)
        self.core.debug_log.clear()
        with _gc_paused(), np.errstate(all="ignore"):  # unit math is C-like: no FP warnings
            self.core.fp_quiet = True
            try:
                for i in order:
                    found[i] = self.core.run_program(specs[i])
            finally:
                self.core.fp_quiet = False
            traces = [t for t in found if t is not None]
            rank = {s.program_id: i for i, s in enumerate(specs)}
            log = sorted(self.core.debug_log, key=lambda e: rank[e[0]])
            timing = self.timing(self.machine, traces, sram_mode, image)
        return LaunchResult(
            programs=len(traces), instructions=sum(t.instructions for t in traces),
            commands=sum(1 for t in traces for e in t.events if isinstance(e, CommandEvent)),
            traces=traces, timing=timing, debug_log=log)
