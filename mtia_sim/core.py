"""The PE control core: one reusable Unicorn RV64 engine that runs programs one after another.

For each program the core points the local-store window at the assigned PE's buffer, sets up the
ABI registers and runs `emu_start(entry, EXIT_ADDR)`. Command-processor registers are an MMIO
page with Python callbacks: a DOORBELL write decodes the descriptor and executes it at once
(functional units are synchronous), recording a CommandEvent for the timing model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from unicorn import (
    UC_ARCH_RISCV,
    UC_HOOK_INTR,
    UC_HOOK_MEM_INVALID,
    UC_MODE_RISCV64,
    UC_PROT_ALL,
    UC_PROT_READ,
    UC_PROT_WRITE,
    Uc,
    UcError,
)
from unicorn import riscv_const as rv

from mtia_sim import isa
from mtia_sim.blockcount import S_COUNT, AccessCounter, BlockCounter, NativeMmio, _native_hook
from mtia_sim.errors import (
    CoreTrapError,
    DeviceAssertError,
    IllegalCommandError,
    Location,
    MemoryFaultError,
    MisalignedDescriptorError,
    RunawayError,
    SimulationError,
)
from mtia_sim.events import CommandEvent, CoreEvent, EndEvent, FenceEvent, MemLevel, ProgramTrace
from mtia_sim.fastpath.doorbells import FastDoorbells
from mtia_sim.fastpath.layout import F_HASH, F_QCOUNT
from mtia_sim.hostblas import limit_blas_threads
from mtia_sim.isa import CommandDescriptor, Reg
from mtia_sim.loader import Image
from mtia_sim.memory import MemorySystem, page_aligned_buffer
from mtia_sim.rv_registers import ARG_REGS, RegisterBatch, RegisterReader
from mtia_sim.units import execute, replay

MSTATUS_FS_INITIAL = 1 << 13
TCG_BUFFER_BYTES = 128 << 20  # translated-code cache (Unicorn's default reserves 1 GiB of address space)
PLAN_CACHE_SIZE = 32768  # distinct (descriptor, PE) pairs whose replay closures are kept (~1.5 KB each)
SEEN_CACHE_SIZE = 65536  # distinct (descriptor, PE) pairs remembered as seen once
_NEW_EVENT = object.__new__
TRAP_NAMES = {0: "instruction address misaligned", 1: "instruction access fault", 2: "illegal instruction",
              3: "breakpoint (ebreak)", 4: "load address misaligned", 5: "load access fault",
              6: "store address misaligned", 7: "store access fault", 8: "ecall from U-mode",
              9: "ecall from S-mode", 11: "ecall from M-mode"}


@dataclass
class ProgramSpec:
    """One grid point to run."""

    program_id: tuple[int, int, int]
    num_programs: tuple[int, int, int]
    pe: int
    core: int
    args: list[int]  # 64-bit argument slots


class _Run:
    """State of the program being run (read by the MMIO callbacks); a plain class: one per program."""

    __slots__ = ("spec", "trace", "args_ptr", "last_count", "last_access", "commands", "exit_status", "error",
                 "fault", "trap", "pending_low", "debug_log")

    def __init__(self, spec: ProgramSpec, trace: ProgramTrace, args_ptr: int, last_access: list[int]) -> None:
        self.spec = spec
        self.trace = trace
        self.args_ptr = args_ptr
        self.last_count = 0
        self.last_access = last_access  # AccessCounter totals at the last event
        self.commands = 0
        self.exit_status: int | None = None
        self.error: BaseException | None = None
        self.fault: tuple[int, int, int] | None = None  # (access, address, size)
        self.trap: int | None = None
        self.pending_low: int | None = None  # low half of a 64-bit MMIO store split by Unicorn
        self.debug_log: list[tuple[tuple[int, int, int], int]] = []


class Core:
    """A Unicorn RV64 engine with the chip's memory map, reused for every program.

    `python_block_hook=True` uses the pure-Python block counter and MMIO path (the fallback when
    the host JIT is unavailable; kept for tests).
    """

    def __init__(self, mem: MemorySystem, *, max_instructions: int, max_commands: int,
                 python_block_hook: bool = False) -> None:
        self.mem = mem
        self.max_instructions = max_instructions
        self.max_commands = max_commands
        limit_blas_threads()  # the DPE's tile matmuls: one host thread (mtia_sim/hostblas.py)
        self.uc = uc = Uc(UC_ARCH_RISCV, UC_MODE_RISCV64)
        uc.ctl_set_tcg_buffer_size(TCG_BUFFER_BYTES)  # type: ignore[attr-defined]
        self.code = page_aligned_buffer(isa.CODE_SIZE)
        self.stack = page_aligned_buffer(isa.STACK_SIZE)
        uc.mem_map(isa.EXIT_ADDR & ~0xFFF, 0x1000, UC_PROT_ALL)
        uc.mem_map_ptr(isa.CODE_BASE, isa.CODE_SIZE, UC_PROT_ALL, self.code.ctypes.data)
        uc.mem_map_ptr(isa.STACK_BASE, isa.STACK_SIZE, UC_PROT_READ | UC_PROT_WRITE, self.stack.ctypes.data)
        self.native_mmio: NativeMmio | None = None
        if not python_block_hook and _native_hook() is not None:
            self.native_mmio = NativeMmio(self.code, isa.CODE_BASE, self._register_write,
                                          lambda off, size: self._mmio_read(uc, off, size, None))
            self.native_mmio.map(uc, isa.MMIO_BASE, isa.MMIO_SIZE)
        else:
            uc.mmio_map(isa.MMIO_BASE, isa.MMIO_SIZE, self._mmio_read, None, self._mmio_write, None)
        rw = UC_PROT_READ | UC_PROT_WRITE
        if mem.sram.size:
            uc.mem_map_ptr(isa.SRAM_BASE, mem.sram.size, rw, mem.sram.ctypes.data)
        uc.mem_map_ptr(isa.DRAM_BASE, mem.dram.size, rw, mem.dram.ctypes.data)
        self.counter = BlockCounter(self.code, isa.CODE_BASE, force_python=python_block_hook)
        self.counter.install(uc)
        self.counter.install_pc_sync(uc, isa.MMIO_BASE, isa.MMIO_BASE + isa.MMIO_SIZE)
        # scalar core accesses to SRAM/DRAM (the local store and stack are the core's own, not counted)
        self.access = AccessCounter([(MemLevel.SRAM.value, isa.SRAM_BASE, int(mem.sram.size)),
                                     (MemLevel.DRAM.value, isa.DRAM_BASE, int(mem.dram_window))],
                                    force_python=python_block_hook)
        self.access.install(uc)
        self.fast = self._fast_path()
        uc.hook_add(UC_HOOK_MEM_INVALID, self._on_fault)
        uc.hook_add(UC_HOOK_INTR, self._on_trap)
        uc.reg_write(rv.UC_RISCV_REG_MSTATUS, uc.reg_read(rv.UC_RISCV_REG_MSTATUS) | MSTATUS_FS_INITIAL)
        self._entry_regs = RegisterBatch(uc, (*ARG_REGS, rv.UC_RISCV_REG_SP, rv.UC_RISCV_REG_RA))
        self._pc = RegisterReader(uc, rv.UC_RISCV_REG_PC)
        self.fp_quiet = False  # the caller already ignores numpy FP errors (Simulator.launch sets it)
        self.mapped_pe: int | None = None
        self._args: list[int] = []
        self._args_bytes = np.zeros(0, dtype=np.uint8)
        self.image: Image | None = None
        self.run: _Run | None = None
        self.debug_log: list[tuple[tuple[int, int, int], int]] = []

    def _fast_path(self) -> FastDoorbells | None:
        """The native doorbell fast path (mtia_sim/fastpath/), unless the host JIT is missing or
        KEGEN_SIM_FAST_DOORBELL=0."""
        if self.native_mmio is None or os.environ.get("KEGEN_SIM_FAST_DOORBELL", "1") == "0":
            return None
        try:
            count_addr = self.counter.state.ctypes.data + 8 * S_COUNT
            fast = FastDoorbells(self.mem, self.stack, isa.STACK_BASE, count_addr, self.access.state,
                                 PLAN_CACHE_SIZE)
        except RuntimeError:
            return None
        self.native_mmio.set_fast_path(fast.function, fast.state)
        self.mem.on_invalidate.append(fast.clear)
        self._fast_words = fast.words
        return fast

    # -- image and local store ---------------------------------------------------------------
    def load(self, image: Image) -> None:
        """Copy the image into the code region (replacing what was there) and drop stale translations."""
        old = self.image.size if self.image is not None else isa.CODE_SIZE
        self.code[:old] = 0
        self.code[:image.size] = np.frombuffer(image.blob, dtype=np.uint8)
        self.uc.ctl_flush_tb()  # type: ignore[attr-defined]
        self.counter.flush()
        self.image = image

    def map_host(self, page_device: int, page_bytes: int, page_host: int) -> None:
        """Map host pages (page-aligned) at a DRAM device address for the core's loads and stores."""
        self.uc.mem_map_ptr(page_device, page_bytes, UC_PROT_READ | UC_PROT_WRITE, page_host)

    def unmap_host(self, page_device: int, page_bytes: int) -> None:
        self.uc.mem_unmap(page_device, page_bytes)

    def _map_local(self, pe: int) -> None:
        if self.mapped_pe == pe:
            return
        shared = self.mem.shared_locals
        if shared is not None:  # one window mapped once: show that PE's pages in it
            if self.mapped_pe is None:
                self.uc.mem_map_ptr(isa.LOCAL_BASE, shared.size, UC_PROT_READ | UC_PROT_WRITE, shared.window)
            shared.show(pe)
            self.mapped_pe = pe
            return
        size = self.mem.local_store_bytes
        if self.mapped_pe is not None:
            self.uc.mem_unmap(isa.LOCAL_BASE, size)
        buf = self.mem.local(pe)
        self.uc.mem_map_ptr(isa.LOCAL_BASE, size, UC_PROT_READ | UC_PROT_WRITE, buf.ctypes.data)
        self.mapped_pe = pe

    # -- running -------------------------------------------------------------------------------
    def run_program(self, spec: ProgramSpec) -> ProgramTrace:
        """Run one program to completion and return its trace; raises SimulationError subclasses."""
        if self.image is None:
            raise SimulationError("no image loaded")
        if self.mapped_pe != spec.pe:
            self._map_local(spec.pe)
        uc = self.uc
        args = spec.args
        if args != self._args:  # the argument block, packed once per launch
            self._args = list(args)
            self._args_bytes = np.asarray(args, dtype=np.uint64).view(np.uint8)
        args_bytes = self._args_bytes
        nargs = len(args)
        args_ptr = isa.STACK_BASE + isa.STACK_SIZE - (-(-8 * nargs // 16) * 16 or 16)
        if nargs:
            off = args_ptr - isa.STACK_BASE
            self.stack[off:off + 8 * nargs] = args_bytes
        run = self.run = _Run(spec, ProgramTrace(spec.program_id, spec.pe, spec.core), args_ptr,
                              self.access.totals())
        self._entry_regs.write((args_ptr, *spec.program_id, *spec.num_programs, args_ptr, isa.EXIT_ADDR))
        self.counter.start(self.max_instructions)
        if self.native_mmio is not None:
            self.native_mmio.reset()
        if self.fast is not None:
            self.fast.begin(spec.pe, self.max_commands)
        try:
            if self.fp_quiet:
                uc.emu_start(self.image.entry, isa.EXIT_ADDR)
            else:
                with np.errstate(all="ignore"):  # unit math is C-like: no FP warnings
                    uc.emu_start(self.image.entry, isa.EXIT_ADDR)
            self._drain(run)
        except UcError as exc:
            self._drain_before_fault(run)
            self._raise_uc_error(run, exc)
        except SimulationError as exc:
            raise exc.locate(self._location(run)) from None
        finally:
            self.run = None
            self.debug_log.extend(run.debug_log)
        if run.error is not None:
            err = run.error
            if isinstance(err, SimulationError):
                raise err.locate(self._location(run)) from None
            raise err
        if run.trap is not None:
            self._raise_uc_error(run, None)
        self._end_core_event(run)
        if run.exit_status is not None and run.exit_status != 0:
            raise DeviceAssertError(f"device assert failed: the program wrote status {run.exit_status} "
                                    "to EXIT",
                                    self._location(run))
        if run.exit_status is None and self.counter.budget_hit:
            raise RunawayError(f"program exceeded the instruction budget of {self.max_instructions}",
                               self._location(run))
        if run.exit_status is None and self._pc.read() != isa.EXIT_ADDR:
            raise SimulationError("the core stopped before the program returned", self._location(run))
        run.trace.events.append(EndEvent())
        return run.trace

    def _drain(self, run: _Run) -> None:
        """Trace events of the commands the fast path handled since the last drain, in order (the
        commands themselves already ran)."""
        fast = self.fast
        if fast is not None and self._fast_words[F_QCOUNT]:
            run.last_count, run.last_access, n = fast.drain(run.trace.events, run.last_count, run.last_access,
                                                            self._core_event)
            run.commands += n
            fast.set_budget(self.max_commands - run.commands)

    def _drain_before_fault(self, run: _Run) -> None:
        """Commands issued before a core fault come first: their errors win."""
        try:
            self._drain(run)
        except SimulationError as exc:
            raise exc.locate(self._location(run)) from None

    def _core_event(self, n: int, now: list[int], last: list[int]) -> CoreEvent:
        names = self.access.names
        acc = tuple((names[i], now[2 * i] - last[2 * i], now[2 * i + 1] - last[2 * i + 1])
                    for i in range(len(names)) if now[2 * i] != last[2 * i])
        return CoreEvent(n, acc)

    def _end_core_event(self, run: _Run) -> None:
        count = self.counter.count
        n = count - run.last_count
        if n > 0:
            now = self.access.totals()
            if now == run.last_access:
                run.trace.events.append(CoreEvent(n))
            else:
                run.trace.events.append(self._core_event(n, now, run.last_access))
                run.last_access = now
            run.last_count = count

    def _location(self, run: _Run, **kw: Any) -> Location:
        return Location(pe=run.spec.pe, core=run.spec.core, program_id=run.spec.program_id,
                        pc=self.uc.reg_read(rv.UC_RISCV_REG_PC), **kw)

    def _raise_uc_error(self, run: _Run, exc: UcError | None) -> None:
        loc = self._location(run)
        if run.trap is not None:
            name = TRAP_NAMES.get(run.trap, f"exception {run.trap}")
            raise CoreTrapError(f"the core trapped: {name} (pc is at or just after the instruction)",
                                loc) from None
        if run.fault is not None:
            access, addr, size = run.fault
            kind = {19: "read", 20: "write", 21: "instruction fetch", 22: "read", 23: "write",
                    24: "instruction fetch"}.get(access, "access")
            raise MemoryFaultError(f"wild {kind} of {size} bytes ({exc})", loc, address=addr) from None
        raise MemoryFaultError(f"the core faulted: {exc}", loc) from None

    # -- hooks ----------------------------------------------------------------------------------
    def _on_fault(self, uc: Uc, access: int, address: int, size: int, value: int, _ud: Any) -> bool:
        if self.run is not None and self.run.fault is None:
            self.run.fault = (access, address, size)
        return False

    def _on_trap(self, uc: Uc, intno: int, _ud: Any) -> None:
        if self.run is not None and self.run.trap is None:
            self.run.trap = intno
        uc.emu_stop()

    def _mmio_read(self, uc: Uc, offset: int, size: int, _ud: Any) -> int:
        run = self.run
        if run is None:
            return 0
        reg = offset & ~7
        spec = run.spec
        values = {
            Reg.PROGRAM_ID_X: spec.program_id[0], Reg.PROGRAM_ID_Y: spec.program_id[1],
            Reg.PROGRAM_ID_Z: spec.program_id[2], Reg.NUM_PROGRAMS_X: spec.num_programs[0],
            Reg.NUM_PROGRAMS_Y: spec.num_programs[1], Reg.NUM_PROGRAMS_Z: spec.num_programs[2],
            Reg.PE_ID: spec.pe, Reg.CORE_ID: spec.core, Reg.ARGS_PTR: run.args_ptr,
        }
        v = values.get(reg, 0)  # type: ignore[call-overload]
        return (v >> (8 * (offset - reg))) & ((1 << (8 * size)) - 1)

    def _store_width(self, pc: int) -> int:
        """Bytes stored by the store instruction at `pc` (8 when it cannot be told)."""
        off = pc - isa.CODE_BASE
        if not 0 <= off < self.code.size - 4:
            return 8
        lo = int(self.code[off]) | int(self.code[off + 1]) << 8
        if lo & 3 == 3:
            opcode, funct3 = lo & 0x7F, (lo >> 12) & 7
            return 1 << funct3 if opcode in (0x23, 0x27) and funct3 <= 3 else 8
        return 4 if lo >> 13 == 6 else 8  # c.sw / c.swsp; c.sd / c.sdsp / c.fsd are 8 bytes

    def _mmio_write(self, uc: Uc, offset: int, size: int, value: int, _ud: Any) -> None:
        """Python MMIO write path (when the native joiner is unavailable)."""
        run = self.run
        if run is None:
            return
        pc = uc.reg_read(rv.UC_RISCV_REG_PC)
        # Unicorn splits 64-bit MMIO stores into two 32-bit writes (low half first): join them.
        if size == 4 and offset % 8 == 0:
            if self._store_width(pc) == 8:
                run.pending_low = value
                return
        if size == 4 and offset % 8 == 4:
            if run.pending_low is None:
                return
            offset, value, run.pending_low = offset - 4, run.pending_low | value << 32, None
        self._register_write(offset, value, pc)

    def _register_write(self, offset: int, value: int, pc: int) -> None:
        """One whole register store by the program at `pc`."""
        run = self.run
        if run is None:
            return
        try:
            if self.fast is not None and self._fast_words[F_QCOUNT]:
                self._drain(run)
            if offset == Reg.DOORBELL:
                self._doorbell(run, value, pc)
            elif offset == Reg.FENCE:
                self._end_core_event(run)
                run.trace.events.append(FenceEvent(int(value), pc=pc))
            elif offset == Reg.EXIT:
                run.exit_status = value - (1 << 64) if value >> 63 else value
                self.uc.emu_stop()
            elif offset == Reg.PRINT:
                run.debug_log.append((run.spec.program_id, value))
        except BaseException as exc:  # Unicorn swallows callback exceptions: keep it, stop, re-raise later
            if run.error is None:
                run.error = exc
            self.uc.emu_stop()

    def _descriptor_bytes(self, run: _Run, addr: int) -> bytes:
        end = addr + isa.DESC_BYTES
        if isa.STACK_BASE <= addr and end <= isa.STACK_BASE + isa.STACK_SIZE:
            off = addr - isa.STACK_BASE
            return self.stack[off:off + isa.DESC_BYTES].tobytes()
        region = self.mem.resolve(addr, isa.DESC_BYTES, run.spec.pe)
        if region is not None:
            return region.buffer[region.offset:region.offset + isa.DESC_BYTES].tobytes()
        try:
            return bytes(self.uc.mem_read(addr, isa.DESC_BYTES))
        except UcError:
            raise MemoryFaultError("command descriptor is not in mapped memory", address=addr) from None

    def _doorbell(self, run: _Run, addr: int, pc: int) -> None:
        if addr % isa.DESC_ALIGNMENT:
            raise MisalignedDescriptorError(
                f"command descriptor address is not {isa.DESC_ALIGNMENT}-byte aligned", address=addr)
        run.commands += 1
        if run.commands > self.max_commands:
            raise RunawayError(f"program exceeded the command budget of {self.max_commands}")
        fast = self.fast
        if fast is not None:
            fast.set_budget(self.max_commands - run.commands)
        raw = self._descriptor_bytes(run, addr)
        pe = run.spec.pe
        plans = self.mem.plan_cache
        plan = plans.get((raw, pe))
        self._end_core_event(run)
        if plan is not None:  # this exact command ran on this PE before: redo it on the same views
            redo, template = plan
            try:
                redo()
            except (ValueError, TypeError, OverflowError, IndexError) as exc:  # as units.execute reports it
                op = CommandDescriptor.from_bytes(raw).op
                raise IllegalCommandError(f"{op.name}: invalid operand combination ({exc})").locate(
                    Location(command=f"{op.name} tag={template.tag}", pc=pc)) from exc
            event = _NEW_EVENT(CommandEvent)
            event.__dict__.update(template.__dict__)
            if fast is not None and self._fast_words[F_HASH] >= 0:
                fast.register(raw, pe, redo, template)
        else:
            try:
                desc = CommandDescriptor.from_bytes(raw)
            except ValueError as exc:
                raise IllegalCommandError(f"bad command descriptor: {exc}", address=addr) from None
            try:
                event = execute(desc, self.mem, pe)
            except SimulationError as exc:
                raise exc.locate(Location(command=f"{desc.op.name} tag={desc.tag}", pc=pc)) from None
            # a plan is built the second time a command is seen (loops), and the first PLAN_CACHE_SIZE
            # plans are kept: a cycle of more distinct commands than that would only rebuild them
            seen = self.mem.seen_commands
            if (raw, pe) in seen:
                if len(plans) < PLAN_CACHE_SIZE:
                    again = replay(desc, self.mem, pe)
                    if again is not None:
                        plans[(raw, pe)] = (again, event)
                        if fast is not None:
                            fast.register(raw, pe, again, event)
            elif len(seen) < SEEN_CACHE_SIZE:
                seen.add((raw, pe))
            if fast is not None and self._fast_words[F_HASH] >= 0 and fast.seen_twice(raw, pe):
                # the same command at other addresses ran before: a relocatable native plan
                again = plans[(raw, pe)][0] if (raw, pe) in plans else replay(desc, self.mem, pe)
                if again is not None:
                    fast.register(raw, pe, again, event)
        event.pc = pc
        run.trace.events.append(event)
