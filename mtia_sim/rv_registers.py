"""Fast register access to a Unicorn RV64 engine: the Python binding builds several ctypes objects per
register per call, so the core's per-program writes and PC reads go through preallocated arrays and
one direct libunicorn call."""

from __future__ import annotations

import ctypes

from unicorn import Uc, UcError
from unicorn import riscv_const as rv

ARG_REGS = (rv.UC_RISCV_REG_A0, rv.UC_RISCV_REG_A1, rv.UC_RISCV_REG_A2, rv.UC_RISCV_REG_A3,  # kernel ABI
            rv.UC_RISCV_REG_A4, rv.UC_RISCV_REG_A5, rv.UC_RISCV_REG_A6)


class RegisterBatch:
    """Writes a fixed list of registers with one uc_reg_write_batch call over preallocated ctypes
    arrays (the Python binding builds several ctypes objects per register per call)."""

    def __init__(self, uc: Uc, regs: tuple[int, ...]) -> None:
        from unicorn.unicorn_py3 import unicorn as ucmod

        n = len(regs)
        self._call = ucmod.uclib.uc_reg_write_batch
        self._uch = uc._uch  # type: ignore[attr-defined]
        self._ids = (ctypes.c_int * n)(*regs)
        self._vals = (ctypes.c_uint64 * n)()
        base = ctypes.addressof(self._vals)
        self._ptrs = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        self._n = n

    def write(self, values: tuple[int, ...]) -> None:
        try:
            self._vals[:] = list(values)
        except (OverflowError, TypeError):  # negative or > 64-bit values: wrap them
            self._vals[:] = [v & 0xFFFF_FFFF_FFFF_FFFF for v in values]
        status = self._call(self._uch, self._ids, self._ptrs, self._n)
        if status:
            raise UcError(status)


class RegisterReader:
    """Reads one register with a direct uc_reg_read into a preallocated value (no per-call objects)."""

    def __init__(self, uc: Uc, reg: int) -> None:
        from unicorn.unicorn_py3 import unicorn as ucmod

        self._call = ucmod.uclib.uc_reg_read
        self._uch = uc._uch  # type: ignore[attr-defined]
        self._reg = reg
        self._val = ctypes.c_uint64()
        self._ref = ctypes.byref(self._val)

    def read(self) -> int:
        status = self._call(self._uch, self._reg, self._ref)
        if status:
            raise UcError(status)
        return int(self._val.value)
