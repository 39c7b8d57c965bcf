"""Native helpers for the Unicorn core: instruction counting per block and the MMIO write joiner.

Counting per translated block is the cheap way (notes/unicorn-llvmlite.md). A Python block hook
costs about a microsecond per executed block, so the hook is a small host function, written in
LLVM IR and JIT-compiled for the host with llvmlite at first use: it walks the block's bytes in
the code buffer (2-byte compressed or 4-byte instructions), adds the count to a shared int64 slot
and calls `uc_emu_stop` when the instruction budget is exceeded. If the host JIT is unavailable,
a Python hook with a per-address cache does the same, slower.

`NativeMmio` is the command-register page: Unicorn delivers a 64-bit store as two 32-bit writes,
so a native callback joins them (deciding from the store instruction at the PC whether a second
half follows) and calls Python once per register store.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

# state words shared with the hook
S_CODE_BASE, S_CODE_SIZE, S_HOST_PTR, S_COUNT, S_LIMIT, S_STOP_FN, S_STOPPED = range(7)
STATE_WORDS = 8

HOOK_IR = r"""
define void @mtia_block_hook(ptr %uc, i64 %addr, i32 %size, ptr %st) {
entry:
  %base = load i64, ptr %st
  %p_size = getelementptr i64, ptr %st, i64 1
  %csize = load i64, ptr %p_size
  %p_host = getelementptr i64, ptr %st, i64 2
  %hosti = load i64, ptr %p_host
  %host = inttoptr i64 %hosti to ptr
  %size64 = zext i32 %size to i64
  %off = sub i64 %addr, %base
  %end = add i64 %off, %size64
  %inr = icmp ule i64 %end, %csize
  %inr2 = icmp ule i64 %off, %csize
  %nonempty = icmp ugt i64 %size64, 0
  %ok0 = and i1 %inr, %inr2
  %ok = and i1 %ok0, %nonempty
  br i1 %ok, label %loop, label %fallback
loop:
  %p = phi i64 [ %off, %entry ], [ %pn, %loop ]
  %n = phi i64 [ 0, %entry ], [ %nn, %loop ]
  %bp = getelementptr i8, ptr %host, i64 %p
  %b = load i8, ptr %bp
  %lo = and i8 %b, 3
  %is4 = icmp eq i8 %lo, 3
  %len = select i1 %is4, i64 4, i64 2
  %pn = add i64 %p, %len
  %nn = add i64 %n, 1
  %more = icmp ult i64 %pn, %end
  br i1 %more, label %loop, label %done
fallback:
  %nf = lshr i64 %size64, 2
  br label %done
done:
  %cnt = phi i64 [ %nn, %loop ], [ %nf, %fallback ]
  %p_count = getelementptr i64, ptr %st, i64 3
  %c0 = load i64, ptr %p_count
  %c1 = add i64 %c0, %cnt
  store i64 %c1, ptr %p_count
  %p_lim = getelementptr i64, ptr %st, i64 4
  %lim = load i64, ptr %p_lim
  %over = icmp ugt i64 %c1, %lim
  br i1 %over, label %stop, label %ret
stop:
  %p_stopped = getelementptr i64, ptr %st, i64 6
  store i64 1, ptr %p_stopped
  %p_fn = getelementptr i64, ptr %st, i64 5
  %fni = load i64, ptr %p_fn
  %fn = inttoptr i64 %fni to ptr
  %r = call i32 %fn(ptr %uc)
  br label %ret
ret:
  ret void
}

define i1 @mtia_noop_mem_hook(ptr %uc, i32 %type, i64 %addr, i32 %size, i64 %value, ptr %ud) {
  ret i1 1
}

; Memory access counter (UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE over one address range):
; st[0] += 1 (accesses), st[1] += size (bytes).
define void @mtia_access_hook(ptr %uc, i32 %type, i64 %addr, i32 %size, i64 %value, ptr %st) {
  %c = load i64, ptr %st
  %c1 = add i64 %c, 1
  store i64 %c1, ptr %st
  %pb = getelementptr i64, ptr %st, i64 1
  %b = load i64, ptr %pb
  %s = zext i32 %size to i64
  %b1 = add i64 %b, %s
  store i64 %b1, ptr %pb
  ret void
}

; One whole register write goes to the fast path first (st[8]: its function or 0, st[9]: its state;
; it returns non-zero when it handled the write), else to Python (st[4]).
define internal void @mtia_dispatch(ptr %st, i64 %offset, i64 %value) {
entry:
  %p_ff = getelementptr i64, ptr %st, i64 8
  %ffi = load i64, ptr %p_ff
  %has = icmp ne i64 %ffi, 0
  br i1 %has, label %fast, label %slow
fast:
  %ff = inttoptr i64 %ffi to ptr
  %p_fs = getelementptr i64, ptr %st, i64 9
  %fsi = load i64, ptr %p_fs
  %fs = inttoptr i64 %fsi to ptr
  %p_pc = getelementptr i64, ptr %st, i64 7
  %pc = load i64, ptr %p_pc
  %r = call i32 %ff(ptr %fs, i64 %offset, i64 %value, i64 %pc)
  %handled = icmp ne i32 %r, 0
  br i1 %handled, label %ret, label %slow
slow:
  %p_fn = getelementptr i64, ptr %st, i64 4
  %fni = load i64, ptr %p_fn
  %fn = inttoptr i64 %fni to ptr
  call void %fn(i64 %offset, i64 %value)
  br label %ret
ret:
  ret void
}

; MMIO write callback: Unicorn splits a 64-bit store into two 32-bit writes (low half first).
; Join them and call the Python handler once per register write: handler(offset, value).
; st: 0 code_base, 1 code_size, 2 host ptr, 3 uc_reg_read, 4 handler, 5 pending low, 6 has low, 7 pc,
; 8 fast doorbell function, 9 its state
define void @mtia_mmio_write(ptr %uc, i64 %offset, i32 %size, i64 %value, ptr %st) {
entry:
  %is4 = icmp eq i32 %size, 4
  br i1 %is4, label %half, label %direct
direct:
  call void @mtia_dispatch(ptr %st, i64 %offset, i64 %value)
  ret void
half:
  %hibit = and i64 %offset, 4
  %ishigh = icmp ne i64 %hibit, 0
  br i1 %ishigh, label %high, label %low
high:
  %p_has = getelementptr i64, ptr %st, i64 6
  %has = load i64, ptr %p_has
  %hasb = icmp ne i64 %has, 0
  br i1 %hasb, label %join, label %done
join:
  store i64 0, ptr %p_has
  %p_lo = getelementptr i64, ptr %st, i64 5
  %lo = load i64, ptr %p_lo
  %hv = shl i64 %value, 32
  %full = or i64 %lo, %hv
  %off4 = sub i64 %offset, 4
  call void @mtia_dispatch(ptr %st, i64 %off4, i64 %full)
  br label %done
low:
  %p_rr = getelementptr i64, ptr %st, i64 3
  %rri = load i64, ptr %p_rr
  %rr = inttoptr i64 %rri to ptr
  %p_pc = getelementptr i64, ptr %st, i64 7
  %e = call i32 %rr(ptr %uc, i32 190, ptr %p_pc)
  %pc = load i64, ptr %p_pc
  %base = load i64, ptr %st
  %p_cs = getelementptr i64, ptr %st, i64 1
  %csize = load i64, ptr %p_cs
  %p_h = getelementptr i64, ptr %st, i64 2
  %hosti = load i64, ptr %p_h
  %host = inttoptr i64 %hosti to ptr
  %off = sub i64 %pc, %base
  %lim = sub i64 %csize, 4
  %inr = icmp ult i64 %off, %lim
  br i1 %inr, label %decode, label %stash
decode:
  %b0p = getelementptr i8, ptr %host, i64 %off
  %b0 = load i8, ptr %b0p
  %off1 = add i64 %off, 1
  %b1p = getelementptr i8, ptr %host, i64 %off1
  %b1 = load i8, ptr %b1p
  %w0 = zext i8 %b0 to i32
  %w1 = zext i8 %b1 to i32
  %w1s = shl i32 %w1, 8
  %h16 = or i32 %w0, %w1s
  %q = and i32 %h16, 3
  %wide = icmp eq i32 %q, 3
  br i1 %wide, label %dec32, label %dec16
dec32:
  %opc = and i32 %h16, 127
  %f3 = lshr i32 %h16, 12
  %f3m = and i32 %f3, 7
  %isst = icmp eq i32 %opc, 35
  %isfst = icmp eq i32 %opc, 39
  %anyst = or i1 %isst, %isfst
  %isd = icmp eq i32 %f3m, 3
  %notst = xor i1 %anyst, true
  %is64a = or i1 %notst, %isd
  br i1 %is64a, label %stash, label %narrow
dec16:
  %cf3 = lshr i32 %h16, 13
  %csw = icmp eq i32 %cf3, 6
  br i1 %csw, label %narrow, label %stash
narrow:
  call void @mtia_dispatch(ptr %st, i64 %offset, i64 %value)
  br label %done
stash:
  %p_lo2 = getelementptr i64, ptr %st, i64 5
  store i64 %value, ptr %p_lo2
  %p_has2 = getelementptr i64, ptr %st, i64 6
  store i64 1, ptr %p_has2
  br label %done
done:
  ret void
}
"""


@functools.cache
def _native_hook() -> tuple[int, int, int, Any, int] | None:
    """(block hook, no-op memory hook, MMIO write joiner addresses, engine keeping them alive,
    memory access counter), or None when the host JIT is unavailable."""
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        mod = llvm.parse_assembly(HOOK_IR)
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        return (engine.get_function_address("mtia_block_hook"),
                engine.get_function_address("mtia_noop_mem_hook"),
                engine.get_function_address("mtia_mmio_write"), engine,
                engine.get_function_address("mtia_access_hook"))
    except Exception:  # pragma: no cover - depends on the host's LLVM build
        return None


def _words(state: np.ndarray) -> Any:
    """A ctypes int64 array over `state`'s memory: indexing it gives Python ints without numpy scalars."""
    return (ctypes.c_int64 * state.size).from_address(state.ctypes.data)


class BlockCounter:
    """Counts instructions of executed blocks in `state[S_COUNT]`; stops the engine past `state[S_LIMIT]`."""

    def __init__(self, code: np.ndarray, code_base: int, force_python: bool = False) -> None:
        self.state = np.zeros(STATE_WORDS, dtype=np.int64)
        self.state[S_CODE_BASE] = code_base
        self.state[S_CODE_SIZE] = code.size
        self.state[S_HOST_PTR] = code.ctypes.data
        self.code = code
        self.code_base = code_base
        self.native = None if force_python else _native_hook()
        self._cache: dict[int, int] = {}
        self._words = _words(self.state)  # fast scalar reads

    def install(self, uc: Any) -> None:
        from unicorn import UC_HOOK_BLOCK
        from unicorn.unicorn_py3 import unicorn as ucmod

        if self.native is not None:
            self.state[S_STOP_FN] = ctypes.cast(ucmod.uclib.uc_emu_stop, ctypes.c_void_p).value or 0
            handle = ucmod.uc_hook_h()
            status = ucmod.uclib.uc_hook_add(
                uc._uch, ctypes.byref(handle), UC_HOOK_BLOCK, ctypes.c_void_p(self.native[0]),
                ctypes.c_void_p(self.state.ctypes.data), ctypes.c_uint64(1), ctypes.c_uint64(0))
            if status != 0:
                raise RuntimeError(f"uc_hook_add(UC_HOOK_BLOCK) failed with status {status}")
        else:
            uc.hook_add(UC_HOOK_BLOCK, self._python_hook())

    def install_pc_sync(self, uc: Any, begin: int, end: int) -> None:
        """Make the PC exact inside MMIO callbacks for stores to [begin, end).

        Unicorn only syncs the PC at block starts unless a memory hook covers the access; a
        ranged no-op write hook costs nothing measurable (stores take the slow path anyway).
        """
        from unicorn import UC_HOOK_MEM_WRITE
        from unicorn.unicorn_py3 import unicorn as ucmod

        if self.native is None:
            uc.hook_add(UC_HOOK_MEM_WRITE, lambda *a: True, None, begin, end - 1)
            return
        handle = ucmod.uc_hook_h()
        status = ucmod.uclib.uc_hook_add(
            uc._uch, ctypes.byref(handle), UC_HOOK_MEM_WRITE, ctypes.c_void_p(self.native[1]),
            ctypes.c_void_p(0), ctypes.c_uint64(begin), ctypes.c_uint64(end - 1))
        if status != 0:
            raise RuntimeError(f"uc_hook_add(UC_HOOK_MEM_WRITE) failed with status {status}")

    def _python_hook(self) -> Callable[..., None]:
        state, cache, code, base = self.state, self._cache, self.code, self.code_base

        def hook(uc: Any, address: int, size: int, _ud: Any) -> None:
            n = cache.get(address)
            if n is None:
                n = cache[address] = count_instructions(code, address - base, size)
            state[S_COUNT] += n
            if state[S_COUNT] > state[S_LIMIT]:
                state[S_STOPPED] = 1
                uc.emu_stop()

        return hook

    def flush(self) -> None:
        """Forget cached block counts (after new code was loaded)."""
        self._cache.clear()

    @property
    def count(self) -> int:
        return int(self._words[S_COUNT])

    def start(self, limit: int) -> None:
        w = self._words
        w[S_COUNT] = 0
        w[S_LIMIT] = limit
        w[S_STOPPED] = 0

    @property
    def budget_hit(self) -> bool:
        return bool(self._words[S_STOPPED])


def count_instructions(code: np.ndarray, offset: int, size: int) -> int:
    """Instructions in code[offset:offset+size] (2-byte compressed ones where the low bits != 0b11)."""
    if offset < 0 or offset + size > code.size:
        return size // 4
    n, p, end = 0, offset, offset + size
    while p < end:
        p += 4 if code[p] & 3 == 3 else 2
        n += 1
    return n


class AccessCounter:
    """Counts the core's loads and stores (accesses and bytes) in named address ranges.

    One ranged UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE per range, native when the host JIT is
    available: accesses elsewhere (stack, local store, code) never reach a hook, so kernels that
    move data with DMA pay nothing. `totals()` gives running (accesses, bytes) per range name.
    """

    def __init__(self, ranges: list[tuple[str, int, int]], force_python: bool = False) -> None:
        self.names = [name for name, _, _ in ranges]
        self.ranges = ranges  # (name, begin, size)
        self.state = np.zeros(2 * max(len(ranges), 1), dtype=np.int64)
        self._words = _words(self.state)
        self.native = None if force_python else _native_hook()

    def install(self, uc: Any) -> None:
        from unicorn import UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE
        from unicorn.unicorn_py3 import unicorn as ucmod

        kinds = UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE
        for i, (_, begin, size) in enumerate(self.ranges):
            if size <= 0:
                continue
            if self.native is None:
                uc.hook_add(kinds, self._python_hook(i), None, begin, begin + size - 1)
                continue
            handle = ucmod.uc_hook_h()
            slot = self.state.ctypes.data + 16 * i
            status = ucmod.uclib.uc_hook_add(
                uc._uch, ctypes.byref(handle), kinds, ctypes.c_void_p(self.native[4]),
                ctypes.c_void_p(slot), ctypes.c_uint64(begin), ctypes.c_uint64(begin + size - 1))
            if status != 0:
                raise RuntimeError(f"uc_hook_add(UC_HOOK_MEM_READ|WRITE) failed with status {status}")

    def _python_hook(self, i: int) -> Callable[..., None]:
        state = self.state

        def hook(uc: Any, access: int, address: int, size: int, value: int, _ud: Any) -> None:
            state[2 * i] += 1
            state[2 * i + 1] += size

        return hook

    def totals(self) -> list[int]:
        """[accesses, bytes] per range, flattened in range order (running totals)."""
        return self._words[:]


MMIO_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64)
MMIO_READ = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                             ctypes.c_void_p)
M_PENDING, M_HAS_PENDING, M_PC, M_FAST_FN, M_FAST_STATE = 5, 6, 7, 8, 9
MMIO_WORDS = 10


class NativeMmio:
    """An MMIO page whose writes go through the native joiner: `on_write(offset, value, pc)` runs once
    per register store (64-bit stores arrive whole), `on_read(offset, size)` per read access."""

    def __init__(self, code: np.ndarray, code_base: int, on_write: Callable[[int, int, int], None],
                 on_read: Callable[[int, int], int]) -> None:
        native = _native_hook()
        if native is None:
            raise RuntimeError("host JIT unavailable")
        from unicorn.unicorn_py3 import unicorn as ucmod

        self._ucmod = ucmod
        self.write_fn = native[2]
        self.state = np.zeros(MMIO_WORDS, dtype=np.int64)
        self.state[0], self.state[1], self.state[2] = code_base, code.size, code.ctypes.data
        self.state[3] = ctypes.cast(ucmod.uclib.uc_reg_read, ctypes.c_void_p).value or 0
        words = self._words = _words(self.state)
        self._handler = MMIO_HANDLER(lambda off, val: on_write(off, val, words[M_PC]))
        self._reader = MMIO_READ(lambda _uc, off, size, _ud: on_read(off, size))
        self.state[4] = ctypes.cast(self._handler, ctypes.c_void_p).value or 0
        self.code = code  # keep the buffer alive

    def map(self, uc: Any, base: int, size: int) -> None:
        status = self._ucmod.uclib.uc_mmio_map(
            uc._uch, base, size, ctypes.cast(self._reader, ctypes.c_void_p), None,
            ctypes.c_void_p(self.write_fn), ctypes.c_void_p(self.state.ctypes.data))
        if status != 0:
            raise RuntimeError(f"uc_mmio_map failed with status {status}")

    def reset(self) -> None:
        self._words[M_HAS_PENDING] = 0

    def set_fast_path(self, function: int, state: np.ndarray | None) -> None:
        """Register writes try `function(state, offset, value, pc)` first (mtia_sim.fastpath)."""
        self._fast_state = state  # keep alive
        self.state[M_FAST_STATE] = 0 if state is None else state.ctypes.data
        self.state[M_FAST_FN] = function if state is not None else 0
