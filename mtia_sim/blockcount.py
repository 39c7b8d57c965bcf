"""Retired-instruction counting for the Unicorn core with one native block hook.

Counting per translated block is the cheap way (notes/unicorn-llvmlite.md). A Python block hook
costs about a microsecond per executed block, so the hook is a small host function, written in
LLVM IR and JIT-compiled for the host with llvmlite at first use: it walks the block's bytes in
the code buffer (2-byte compressed or 4-byte instructions), adds the count to a shared int64 slot
and calls `uc_emu_stop` when the instruction budget is exceeded. If the host JIT is unavailable,
a Python hook with a per-address cache does the same, slower.
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
"""


@functools.cache
def _native_hook() -> tuple[int, int, Any] | None:
    """(block hook address, no-op memory hook address, engine keeping them alive), or None when the
    host JIT is unavailable."""
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
                engine.get_function_address("mtia_noop_mem_hook"), engine)
    except Exception:  # pragma: no cover - depends on the host's LLVM build
        return None


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
        return int(self.state[S_COUNT])

    def start(self, limit: int) -> None:
        self.state[S_COUNT] = 0
        self.state[S_LIMIT] = limit
        self.state[S_STOPPED] = 0

    @property
    def budget_hit(self) -> bool:
        return bool(self.state[S_STOPPED])


def count_instructions(code: np.ndarray, offset: int, size: int) -> int:
    """Instructions in code[offset:offset+size] (2-byte compressed ones where the low bits != 0b11)."""
    if offset < 0 or offset + size > code.size:
        return size // 4
    n, p, end = 0, offset, offset + size
    while p < end:
        p += 4 if code[p] & 3 == 3 else 2
        n += 1
    return n
